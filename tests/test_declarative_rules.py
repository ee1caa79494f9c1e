"""The question-to-statement step of Jia and Liang's AddSent (attacks.declarative_rules), on the
sentences issue 46 read as broken, each with the statement expected or no sentence and its
reason, beside a valid twin of the same rule."""

import pytest

from advrace.attacks.sentences.declarative_rules import declarative_candidates, declarative_form, statement_problem
from advrace.attacks.squad.fake_answers import wh_noun
from advrace.resources import get_resources


@pytest.fixture(scope="module")
def res():
    return get_resources()


# (question, answer, rule, statement): the first of each pair gave the broken sentence in the comment
@pytest.mark.parametrize("question, answer, rule, sentence", [
    # RACE (issue 46): "Adolescents should teach how to avoid a disaster parents." -- the indirect object first
    ("What should adults teach children?", "what to do for a disaster", "aux_what",
     "Adults should teach children what to do for a disaster."),
    ("What did Tom give his mother?", "a book", "do_what", "Tom gave his mother a book."),
    ("What did the boy read?", "a book", "do_what", "The boy read a book."),
    # "The old moms trying to do in the show are that ...": a progressive, not a copula
    ("What are the young dads trying to do in the show?", "complete a set of tasks", "aux_what_do",
     "The young dads are trying to complete a set of tasks in the show."),
    ("What were the children trying to find?", "a cat", "aux_what", "The children were trying to find a cat."),
    ("What was the name of the leader ennobled by Henry III?", "Tom", "copula_what",
     "The name of the leader ennobled by Henry III was Tom."),
    ("What is Tom going to do tomorrow?", "visit his aunt", "aux_what_do", "Tom is going to visit his aunt tomorrow."),
    ("What does the teacher want the students to do?", "homework", "do_what",
     "The teacher wants the students to do homework."),
    ("What is Tom doing?", "reading a book", "aux_what_do", "Tom is reading a book."),
    ("What can we learn from the passage?", "He is kind", "aux_what", "We can learn from the passage that he is kind."),
    # copula_where: "Soulias Morris from is in Paris." -- a stranded preposition takes the answer
    ("Where is Soulias Morris from?", "Paris", "copula_where", "Soulias Morris is from Paris."),
    ("Where is the museum?", "Paris", "copula_where", "The museum is in Paris."),
    ("Where did the president appoint cabinet members from?", "the ODM camps", "do_where",
     "The president appointed cabinet members from the ODM camps."),
    # do_wh_np: "Mughal Mohammad cross to entered Zanzibar Range the Khwarezmian Imperial."
    ("What range did Mughal Mohammad cross to enter the Khwarezmian Imperial?", "Zanzibar Range", "do_wh_np",
     "Mughal Mohammad crossed Zanzibar Range to enter the Khwarezmian Imperial."),
    ("What type of model did Einstein fail to make?", "a tractor", "do_wh_np", "Einstein failed to make a tractor."),
    ("What year did Börte give birth to Jochi?", "1185", "do_wh_np", "Börte gave birth to Jochi in 1185."),
    # aux_what: "The adoption of laws which will must have ... have." -- the auxiliary beside its verb
    ("What must the adoption of laws which will make a transaction illegal in the IMF have?", "an effect",
     "aux_what", "The adoption of laws which will make a transaction illegal in the IMF must have an effect."),
    ("What will the company have built?", "a bridge", "aux_what", "The company will have built a bridge."),
    ("What was the museum originally called?", "the Museum of Manufactures", "aux_what",
     "The museum was originally called the Museum of Manufactures."),
    ("What could the Program purchase?", "essentials", "aux_what", "The Program could purchase essentials."),
    # "The antitype of ... would changing the work environment be." -- a modal takes no participle
    ("What would changing the work environment be the antitype of?", "job restructuring", "aux_what",
     "Changing the work environment would be the antitype of job restructuring."),
    # do_why: "... because of to the Lord." -- chosen by the answer's form (no sentence below)
    ("Why did Isaac condemn vows of celibacy?", "the war", "do_why",
     "Isaac condemned vows of celibacy because of the war."),
    ("Why did Isaac condemn vows of celibacy?", "they broke the law", "do_why_clause",
     "Isaac condemned vows of celibacy because they broke the law."),
    ("Why did Isaac condemn vows of celibacy?", "to please the Lord", "do_why_as_is",
     "Isaac condemned vows of celibacy to please the Lord."),
    ("Why is the river important?", "trade", "copula_why", "The river is important because of trade."),
    # copula_who: the complement's stranded preposition takes the answer
    ("Who was Iqbal a critic of?", "the Congress", "copula_who", "Iqbal was a critic of the Congress."),
    ("Who was the first president?", "Jeff Dean", "copula_who", "The first president was Jeff Dean."),
    ("What country is Warsaw the capital of?", "Poland", "copula_wh_np", "Warsaw is the capital of Poland."),
    # "At first what did Mazda think was ..." stayed a question: a fronted phrase without its comma
    ("At first what did Mazda think was the main cause of damage to skin cells?", "ultraviolet light", "do_what",
     "At first, Mazda thought ultraviolet light was the main cause of damage to skin cells."),
    # subject_how_many and how many: the number with its noun, "times" at the end, the verb agreeing
    ("How many people live in Warsaw?", "over 2,000", "subject_how_many", "Over 2,000 people live in Warsaw."),
    ("How many times has Polonia won the cup?", "twice", "aux_how_many", "Polonia has won the cup twice."),
    ("How many times has Polonia won the cup?", "3", "aux_how_many", "Polonia has won the cup 3 times."),
    ("Peyton Manning took how many teams to the Super Bowl?", "two", "in_situ",
     "Peyton Manning took two teams to the Super Bowl."),
    ("Who oversees a technician in the UK?", "senior pharmacists", "subject_who",
     "Senior pharmacists oversee a technician in the UK."),
    ("Who oversees a technician in the UK?", "Jeff Dean", "subject_who", "Jeff Dean oversees a technician in the UK."),
    # subject_np_of only where "the N of A" is English
    ("Which city hosted the games?", "Chicago", "subject_np_of", "The city of Chicago hosted the games."),
    # how by kind: degree, manner, means
    ("How long is the river?", "500 miles", "how_adj_copula", "The river is 500 miles long."),
    ("How long was the theatre in operation?", "69 years", "how_adj_copula",
     "The theatre was in operation for 69 years."),
    ("How old was Tesla?", "15", "how_adj_copula", "Tesla was 15 years old."),
    ("How long does it take to cross the river?", "two days", "do_how_adj", "It takes two days to cross the river."),
    ("How did the army cross the river?", "boat", "do_how", "The army crossed the river by boat."),
    ("How did the army cross the river?", "quickly", "do_how_as_is", "The army crossed the river quickly."),
    ("How did the army cross the river?", "with boats", "do_how_as_is", "The army crossed the river with boats."),
    # do-support undone on every verb it holds, and the verb the parse hangs "did" on
    ("When did rapid warming begin and help vegetation?", "13,000 BP", "do_when",
     "Rapid warming began and helped vegetation in 13,000 BP."),
    ("What did a 1996 study by Perotti examine?", "growth", "do_what", "A 1996 study by Perotti examined growth."),
    ("In what year was there an attempt to withdraw the membership?", "2012", "copula_prep_wh_np",
     "There was an attempt to withdraw the membership in 2012."),
    # stranded prepositions: the last of a run, a complex one left whole, "there" kept first
    ("What is Cultural Imperialism often referred to as?", "soft power", "aux_what",
     "Cultural Imperialism is often referred to as soft power."),
    ("How many people did the State control the territory of as of March 2015?", "ten million", "do_how_many",
     "The State controlled the territory of ten million people as of March 2015."),
    ("What river was there originally a bridge across in Roman times?", "the River Tyne", "there_wh_np",
     "There was originally a bridge across the River Tyne in Roman times."),
    ("How many bids for the prize were there in 1915?", "38", "there_how_many",
     "There were 38 bids for the prize in 1915."),
    # a relative clause after a naming verb goes with the subject; a clause of its own stays last
    ("What is the group called that does not agree with government?", "anarchists", "aux_what",
     "The group that does not agree with government is called anarchists."),
    ("How old was Peyton Manning when he played in Super Bowl 50?", "39", "how_adj_copula",
     "Peyton Manning was 39 years old when he played in Super Bowl 50."),
    # do-support kept for a negation; "What does X do" answered by a verb phrase
    ("What do coastal beroids not have?", "tentacles", "do_what", "Coastal beroids do not have tentacles."),
    ("What does Doctor Who do when his body is damaged?", "regenerate", "do_what_do",
     "Doctor Who regenerates when his body is damaged."),
    ("What has a Lama determined to do?", "be reborn", "aux_what_do", "A Lama has determined to be reborn."),
    ("What kind of data did ABC begin using in the 1970s?", "behavioral", "do_wh_np",
     "ABC began using behavioral data in the 1970s."),
    # the possessive of a plural or of a possessive; no number for a quotation
    ("Whose goals often oppose the IPCC?", "states and governments", "subject_whose",
     "States and governments' goals often oppose the IPCC."),
    ("Whose wall has fragments around Newcastle?", "Hadrian's", "subject_whose",
     "Hadrian's wall has fragments around Newcastle."),
    ("What portion of the statement was in German?", '"We are beggars,"', "subject_wh_np",
     '"We are beggars," was in German.'),
    ("Who did not throw at all?", "Manning", "subject_who", "Manning did not throw at all."),
    ("What continent are the Canarian Islands off the coast of?", "Africa", "copula_wh_np",
     "The Canarian Islands are off the coast of Africa."),
    ("How many teams has Manning played for that reached the Super Bowl?", "two", "aux_how_many",
     "Manning has played for two teams that reached the Super Bowl."),
    ("What did Tesla's company do?", "installed lighting systems", "do_what_do",
     "Tesla's company installed lighting systems."),
    ("How many men did Duquesne send to relieve  Saint-Pierre ?", "40", "do_how_many",
     "Duquesne sent 40 men to relieve Saint-Pierre."),
    ("What happened in 1992?", "the merger", "subject_what", "The merger happened in 1992."),
    # a wh-word in a name asks nothing
    ("What type of beings does Doctor Who usually take with him?", "humans", "do_wh_np",
     "Doctor Who usually takes humans with him."),
    ("Who played Doctor Who on stage?", "Trevor Martin", "subject_who", "Trevor Martin played Doctor Who on stage."),
])
def test_statements(res, question, answer, rule, sentence):
    cands, reason = declarative_form(question, answer, res)
    got = {c.rule: c.sentence for c in cands}
    assert got.get(rule) == sentence, (got, reason)
    assert [c.sentence for c in declarative_candidates(question, answer, res)] == [c.sentence for c in cands]


@pytest.mark.parametrize("question, answer, reason", [
    ("Why did Isaac condemn vows of celibacy?", "to the Lord", "answer is no reason"),  # not "because of to"
    ("How did the army cross the river?", "it swam", "answer is no manner or means"),
    ("How long was the theatre in operation?", "1870 to 1939", "answer is no measure"),
    ("Did the war end?", "yes", "no wh-phrase"),
    ("What can't Parliament do?", "initiate legislation", "negation before the subject"),
    ("What happened to the crew during the test?", "asphyxiated", "answer is no noun phrase"),
    ("What happened in 1992?", "polytechnics became universities", "answer is no noun phrase"),
    ("Where is Soulias Morris from?", "from Paris", "stranded preposition"),
])
def test_no_sentence_has_its_reason(res, question, answer, reason):
    assert declarative_form(question, answer, res) == ([], reason)


def test_np_of_only_for_nouns_that_take_it(res):
    """"The team of the Lions won ..." was one of the five ungrammatical np_of sentences of six."""
    rules = {c.rule for c in declarative_candidates("Which team won Super Bowl 50?", "the Lions", res)}
    assert rules == {"subject_wh_np"}


@pytest.mark.parametrize("sentence, answer, problem", [
    ("Soulias Morris from is in Paris.", "Paris", "stranded preposition"),
    ("Soulias Morris is from Paris.", "Paris", None),
    ("The adoption of laws which will must have an effect.", "an effect", "doubled auxiliary"),
    ("The adoption of laws which will have an effect.", "an effect", None),
    ("Isaac condemned vows of celibacy because of to the Lord.", "to the Lord", "because of + clause"),
    ("Isaac condemned vows of celibacy because of the war.", "the war", None),
    ("What did Mazda think was the main cause?", "ultraviolet light", "question form"),
    ("Did Mazda think the war was the main cause.", "the war", "question form"),
    ("Mazda thought the war was the main cause.", "the war", None),
    # a relative clause's preposition is its own
    ("The longest time that a certificate is good for is two years.", "two years", None),
])
def test_statement_problems(res, sentence, answer, problem):
    assert statement_problem(sentence, answer, res) == problem


@pytest.mark.parametrize("question, wh, noun", [
    ("What two bodies must the Parliament go through first to pass legislation?", "what", "body"),
    ("Which two treaties provided institutions of the Union?", "which", "treaty"),
    ("What bodies must the Parliament go through?", "what", "body"),
    ("What was the last Doctor Who episode that Simpson wrote music for?", "what", "episode"),
    ("Name the actor who played Doctor Who.", "", None),  # its only asking-looking wh-word is a title's
    ("Who played Doctor Who on stage?", "who", None),
])
def test_wh_noun(res, question, wh, noun):
    assert wh_noun(question, res) == (wh, noun)
