"""The validity predicates of advrace.core.checks (what a question asks for, what the passage
states, an option's identity, grounding and form) on written passages; the labelled corpus is
tests/test_validity_corpus.py."""

import pytest

from advrace.core.checks.form import cut_inside_word, form_giveaway, span_cut
from advrace.core.checks.grounding import grounded_share, repeats_question
from advrace.core.checks.option_identity import answer_equivalence, duplicate_options, option_key, same_option
from advrace.core.checks.question_kinds import asks_what_passage_states, negated_question
from advrace.core.checks.stated import nearly_stated, stated_in_passage
from advrace.resources import load_stopwords

STORY = ("Tom was tired after the long walk, so he felt exhausted and went to bed early. The next "
         "morning he went to school by bus. Tom's sister paid 40 yuan for the tickets.")


@pytest.mark.parametrize("question", [
    "Which of the following is TRUE according to the passage?",  # RACE's wordings
    "According to the passage, which of the following is correct?",
    "Which of the following statements is right?",
    "What's true about the museum?",
    "What can we learn from the passage?",
    "We can infer from the passage that   _  .",
    "From the passage we know that   _  .",
    "It can be learned from the passage that  _  .",
    "What does the passage tell us?",
    "The passage indicates that _ .",  # read on RACE dev-high (issue 37)
    "According to the passage,  _  .",
    "The writer tells us that _ .",
    # RACE dev-middle (issue 46): a blank that is all the question says of someone; a guess
    "According to the story, Fleming   _  .",
    "According to the passage, the old man _ .",
    "We can guess from the story that   _  .",
    # a "not" that does not ask for what is not so (issue 46)
    "Which of the following is true about the boys who didn't go to school?",
    "What can we learn about people who never exercise?",
])
def test_questions_that_ask_what_the_passage_states(question):
    assert asks_what_passage_states(question)


@pytest.mark.parametrize("question", [
    "Which of the following is NOT true?",  # negated: a stated sentence is the wrong answer
    "Which of the following is not mentioned in the passage?",
    "What can't we learn from the passage?",
    "All of the following are true EXCEPT  _  .",
    "Which of the following statements is false?",
    "Where does Tom live?",  # asks for one fact
    "What was the right way to cook it?",  # "right" of a thing, not of a statement
    "What did Tom do when he turned right?",
    "Which is the best title for the passage?",
    "The passage mainly tells us _ .",  # the main idea, which one stated detail is not
    "According to the passage, what is the function of fluoride?",  # one fact
    "According to the passage, people travel for _ .",  # the blank is one thing said of people
    "What CANNOT we know from the passage?",
    "The program of _ will let you know much about western countries.",
    "You may find this passage in _ .",
])
def test_questions_that_do_not(question):
    assert not asks_what_passage_states(question)


def test_stated_in_passage_needs_a_long_verbatim_run():
    assert stated_in_passage("The next morning he went to school by bus.", STORY)
    assert stated_in_passage("he went to school by bus", STORY)  # case and punctuation aside
    assert not stated_in_passage("He went to school on foot.", STORY)  # the run is too short
    assert not stated_in_passage("by bus", STORY)  # fewer than four words


def test_stated_and_nearly_stated_read_one_view_of_the_passage():
    """Issue 47: a passage quoting "Can Chinese be mixed with English?" states nothing there, for
    both checks; the statement beside it is stated for both."""
    passage = 'He stood up. "Can Chinese be mixed with English?" Liu asked. Chinese can be mixed with Latin words.'
    stop = load_stopwords()
    assert not stated_in_passage("Chinese be mixed with English", passage)
    assert not nearly_stated("Chinese be mixed with English", passage, stop)
    assert stated_in_passage("Chinese can be mixed with Latin", passage)
    assert nearly_stated("Chinese can be mixed with Latin words", passage, stop)
    # RACE's glued sentences (dev-middle): the statement after a question is stated all the same
    glued = "How quickly can you count?Many people think that numbers are the same all over the world.But it is not so."
    assert stated_in_passage("Many people think that numbers are the same all over the world.", glued)
    assert not stated_in_passage("How quickly can you count", glued)
    assert nearly_stated("Many people think numbers are the same all over the world.", glued, stop)


QUOTING = ('Liu asked his teacher, "Can Chinese be mixed with English?" in the English class yesterday. '
           'Chinese can be mixed with Latin words.')


@pytest.mark.parametrize("text, stated, asked", [
    # what the sentence tells around the question: stated, the question taken out
    ("Liu asked his teacher.", True, False),
    ("Liu asked his teacher in the English class.", True, False),
    # the question: asked, never stated
    ("Can Chinese be mixed with English?", False, True),
    ("Chinese be mixed with English", False, True),
    ("Chinese can be mixed with Latin words.", True, False),
])
def test_a_question_quoted_inside_a_sentence_is_its_own_piece_for_every_check(text, stated, asked):
    """Issue 47: the checks read one sentence view. A question quoted inside a sentence asks from
    its opening quotation mark, not from the sentence's start: the narration around it is a
    statement for `stated_in_passage` and `nearly_stated` alike, and no question for
    `asked_in_passage` (which took "Liu asked his teacher" for the question it opens)."""
    from advrace.core.checks.stated import asked_in_passage

    found = (stated_in_passage(text, QUOTING), nearly_stated(text, QUOTING, load_stopwords()),
             asked_in_passage(text, QUOTING))
    assert found == (stated, stated, asked)


@pytest.mark.parametrize("sentence, expected", [
    ('Liu asked his teacher, "Can Chinese be mixed with English?" in class.',
     [("liu asked his teacher", False), ("can chinese be mixed with english", True), ("in class", False)]),
    # no opening quotation mark: the question asks from the sentence's start, glued or not
    ("How quickly can you count?Many people think so.",
     [("how quickly can you count", True), ("many people think so", False)]),
    # a quote inside the question closes before its question mark; an apostrophe closes nothing
    ("\"Have you read 'Hamlet'?\" he asked.", [("have you read hamlet", True), ("he asked", False)]),
    ("She asked, \u2018Why don\u2019t you go?\u2019 and left.",
     [("she asked", False), ("why don\u2019t you go", True), ("and left", False)]),
    ('He said "Hi" and asked "Are you OK?"', [("he said hi and asked", False), ("are you ok", True)]),
])
def test_the_pieces_of_a_sentence_that_ask_and_tell(sentence, expected):
    from advrace.core.checks.sentence_view import passage_sentences, pieces

    assert [(" ".join(p.tokens), p.asks) for p in pieces(sentence)] == expected
    told = tuple(w for text, asks in expected if not asks for w in text.split())
    assert [s.told for s in passage_sentences(sentence).statements] == [told]


@pytest.mark.parametrize("text, stated, asked", [
    ('Mr Jones asked, "What price is the room?"', False, True),  # the question, three words told
    ('"What price is the bed?" Mr Jones asked.', False, True),  # told after it as before it
    ('"What price is the bed?" Mr Jones asked the old woman.', True, False),  # told in six words
])
def test_a_text_quoting_a_question_is_stated_or_asked_by_the_words_it_tells_around_it(text, stated, asked):
    from advrace.core.checks.stated import asked_in_passage

    passage = ('Mr Jones asked, "What price is the room?" The old woman did not answer. '
               '"What price is the bed?" Mr Jones asked the old woman.')
    assert (stated_in_passage(text, passage), asked_in_passage(text, passage)) == (stated, asked)


def test_a_sentence_restated_with_harmless_words_left_out_is_stated():
    """Read on RACE's DG split: "You can walk around in a train." for a passage that says "You can
    walk around in the train and open the windows." is a second right answer to "Which is TRUE?"."""
    passage = ("You can't open the windows on a plane. You can walk around in the train and open the windows. "
               "Also you can carry many things with you in a car. Fes was once the capital of Morocco.")
    assert stated_in_passage("You can walk around in a train.", passage)  # an article changed
    assert stated_in_passage("You can carry many things in a car.", passage)  # "with you" left out
    assert stated_in_passage("You can't open windows.", passage)
    assert not stated_in_passage("You can open the windows on a plane.", passage)  # the negation left out
    assert not stated_in_passage("Fes was the capital of Morocco.", passage)  # "once" changes what it says
    assert not stated_in_passage("You can carry things in a train.", passage)  # a word not in the sentence


TEETH = ("Bad teeth can be painful and even be deadly. Experts say good dental care starts at birth. "
         "The shop opens at nine o'clock every day. Tom's father went to Beijing. Harbin is really very cold in "
         "winter. It can walk and talk, but it cannot climb the stairs. \"Why can't it be mixed with English?\" "
         "Liu said. The use of fluoride to protect teeth is common, and they told old people about it.")


@pytest.mark.parametrize("text, stated", [
    ("They can even be deadly.", True),  # read on RACE dev-high (issue 37): a pronoun, "painful and" left out
    ("It opens at nine every day.", True),
    ("It is really cold there in winter.", True),
    ("They can never be deadly.", False),  # a negation the sentence lacks
    ("It opens at ten every day.", False),  # another number
    ("Tom went to Beijing.", False),  # Tom's father did: "father" is skipped
    ("It can climb the stairs.", False),  # the sentence's negation left out
    ("It can be mixed with English.", False),  # a question states nothing
    ("They can be deadly", True),
    ("Be deadly", False),  # too short to state anything
])
def test_nearly_stated_says_what_one_sentence_says_in_nearly_its_words(text, stated):
    assert nearly_stated(text, TEETH, load_stopwords()) is stated


@pytest.mark.parametrize("candidate, piece", [
    ("Oride to protect teeth", "Oride"),  # read on RACE dev-high's DE split (issue 37)
    ("The use of fluori", "fluori"),
    ("fluoride to protect teeth.", None),
    ("old people", None),  # a piece of "told people", but a word
    ("good dental care starts at school", None),  # not in the passage
])
def test_a_span_cut_inside_a_word_of_the_passage(candidate, piece):
    from advrace.resources import get_resources

    assert cut_inside_word(candidate, TEETH, get_resources().known_word) == piece
    others = ["It helps.", "It is cheap.", "It hurts."]
    assert (form_giveaway(candidate + ".", others, passage=TEETH, known_word=get_resources().known_word)
            == "cut inside a word of the passage") is (piece is not None)


SPANS = ("Ms Lomax, who was tall, met Sequoyah invented things. Heathcliff, the man, came. Boardman astonished "
         "us. On October 10 we left. Tom's book is red, and they don't know it. The man astonished them.")


@pytest.mark.parametrize("span, piece", [
    # read on RACE dev-high's DE split (issue 46): pieces that are words themselves
    ("max, who was tall", "max"),
    ("h invented things", "h"),
    ("cliff, the man", "cliff"),
    ("man astonished us", "man"),
    ("Boardman astonished", None),
    ("man astonished", None),  # the passage holds it whole too ("The man astonished them")
    ("October 1", "1"),  # a number cut
    ("s book is red", "s"),  # after an apostrophe
    ("they don", "don"),  # before one
    ("Tom's book", None),
    ("the man, came.", None),  # end punctuation aside
    ("not in the passage at all", None),
])
def test_a_span_that_begins_or_ends_inside_a_passage_word(span, piece):
    assert span_cut(span, SPANS) == piece


@pytest.mark.parametrize("candidate, blank", [("being _ short of _ exercise", True), ("seldom ___ go out", True),
                                              ("for hours ( ) a day", True), ("being short of exercise", False)])
def test_an_option_holding_a_blank_gives_itself_away(candidate, blank):
    assert (form_giveaway(candidate, ["in a city", "by the sea"]) == "holds a blank") is blank


@pytest.mark.parametrize("candidate, reason", [
    ("Because he was tired.", "equals the answer"),
    ("because he was tired", "equals the answer"),
    ("Because he was tired and sleepy.", "contains the answer"),
    ("he was tired", "is contained in the answer"),
    ("Because Tom was tired.", "shares most words with the answer"),
    ("Because he had homework.", None),
])
def test_answer_equivalence(candidate, reason):
    assert answer_equivalence(candidate, "Because he was tired.") == reason


# Read on RACE dev-middle (a DG split of the sample generator): "He was my son" beside the gold
# "His son" names the son too, a second right answer that shares only half its words.
@pytest.mark.parametrize("candidate, answer, reason", [
    ("He was my son", "His son", "holds every content word of the answer"),
    ("The son of the poor man.", "His son", "holds every content word of the answer"),
    ("Sons are lucky.", "His son", "holds every content word of the answer"),  # up to the plural
    ("His daughter", "His son", None),
    ("Apples and chocolate.", "Juice and oranges.", None),  # read on the same split: a fair distractor
    ("get more confused", "get wiser", None),
    ("sometimes I feel sad", "sad moods", None),  # "moods" is not in it (a paraphrase: the cosine's job)
])
def test_a_candidate_holding_the_answers_content_words_is_the_answer(candidate, answer, reason):
    assert answer_equivalence(candidate, answer, stopwords=load_stopwords()) == reason
    assert answer_equivalence(candidate, answer) != "holds every content word of the answer"  # needs stopwords


# Read on RACE dev-middle (DG of the sample generator, 100 questions): new options that only
# repeat the question's words answer nothing, and a reader drops them at once. RACE's own
# distractors do this for 34 of 4,308 (0.8%): "Jack's" for "Whose house is next to Jack's?".
@pytest.mark.parametrize("candidate, question, echoes", [
    ("it seems that the writer of the story works", "It seems that the writer of the story works  _  .", True),
    ("Bob", "_   and Bob are in a family .", True),
    ("We cannot infer anything from this passage", "What can we infer  from the passage?", True),
    ("Not the best title for the passage", "What's the best title for the passage?", True),
    ("an excellent friend", "The writer believes that an excellent friend   _  .", True),
    ("Two people.", "How many people probably have synesthesia?", False),  # a number answers it
    ("14", "_   girls are in Class 18 .", False),
    ("I felt very sad", "What's the title of the story?", False),
    ("blue", "Bruce likes   _", False),
])
def test_an_option_that_repeats_the_question(candidate, question, echoes):
    assert repeats_question(candidate, question, load_stopwords()) is echoes


# Read on the same split: a new option beside a kept one that says the same thing.
@pytest.mark.parametrize("a, b, same", [
    ("at the school", "at school", True),
    ("he doesn't write down a word", "doesn't write down a word", True),
    ("I know none of these people", "I know most of these people", False),  # quantifiers stay
    ("more color", "less color", False),
    ("at home", "at school", False),
])
def test_options_that_say_the_same_thing(a, b, same):
    assert same_option(a, b) is same


def test_answer_equivalence_matches_whole_words():
    assert answer_equivalence("Anne is his mother", "An") is None
    assert answer_equivalence("Apples and pears", "A") is None  # "a" is no word of it


def test_grounded_share_counts_passage_words_numbers_and_names():
    stop = load_stopwords()
    sources = [STORY, "Why did Tom go to bed early?"]
    assert grounded_share("He went by bus.", sources, stop) == 1.0
    assert grounded_share("The tickets cost 40 yuan.", sources, stop) == pytest.approx(3 / 4)  # cost
    assert grounded_share("Tom's sister walked.", sources, stop) == 1.0  # a possessive, a tense
    assert grounded_share("It's very dangerous.", sources, stop) == 0.0  # generic text
    assert grounded_share("He did it.", sources, stop) == 0.0  # nothing to ground


def test_form_giveaway():
    sentences = ["He went home.", "She liked the film very much.", "They were late for school."]
    assert form_giveaway("It.", sentences) == "1 words beside options of about 5"
    assert form_giveaway("he stayed at home.", sentences) == "starts in lower case, unlike the other options"
    assert form_giveaway("He stayed at home", sentences) == "has no final full stop, unlike the other options"
    assert form_giveaway("He stayed at home.", sentences) is None
    assert form_giveaway("'t worry about it.", sentences) == "starts with a cut-off word or punctuation"
    assert form_giveaway(".5 kilos", ["2 kilos", "3 kilos"]) is None
    assert form_giveaway("At home", ["in a city", "by the sea"]) == "starts in upper case, unlike the other options"


def test_duplicate_options_and_option_key():
    assert option_key("  Tom  went.  ") == "tom went"
    assert duplicate_options(["Tom.", "Mary", "tom", "Mary!"]) == [2, 3]
    assert duplicate_options(["a", "b"]) == []


@pytest.mark.parametrize("text, refers", [("both A and C (both ...and )", True), ("All the aboves.", True),
                                          ("A & B", True), ("Both of the above", True), ("B", True),
                                          ("Bill and Tom", False), ("Plan A and plan B", False)])
def test_refers_to_options(text, refers):
    from advrace.core.checks.option_identity import refers_to_options

    assert refers_to_options(text) is refers


@pytest.mark.parametrize("text, runs", [("Hide under a desk, or stand in a corner. Cover", True),
                                        ("Tom came. He left.", True), ("Mrs. Green likes apples.", False),
                                        ("The U.S. Army won.", False), ('He said "Hi."', False),
                                        ("J.K.Rowling wrote it", False), ("the U.S.Army won", False),
                                        ("J.Rowling wrote it", False), ("on April l.Those who try", True),
                                        ("L.Those who try", True), ("won the prize.Then he left", True)])
def test_runs_into_next_sentence(text, runs):
    from advrace.core.checks.form import runs_into_next_sentence

    assert runs_into_next_sentence(text) is runs
    assert (form_giveaway(text, ["One sentence here.", "Another one here."]) == "runs into a second sentence") is runs


NEGATED = ["Which is NOT an advantage of Weibo?", "All the following are true EXCEPT _ .",
           "Which statement is false?", "Which of the following is not mentioned in the passage?",
           "Which of the following statements is wrong?", "What can't we learn from the passage?",
           "Which one is incorrect?", "What can't robots do in the future according to the passage?",
           "Who doesn't like doing sports?", "Bob doesn't have _ in his schoolbag.",
           "_ is not a kind of plant-eating fish.", "Paper is not used for _ .",
           "According to the passage, the following can be realized today except _ .",
           # the subject between the auxiliary and its "not" (issue 46: DE and DG wrote a place she
           # had not visited either), or "never", "no longer"
           "Which of the following places has Helen not visited yet?", "What did Tom not do?",
           "What did the little boy never do?", "Who never came to the party?",
           "Which of the following is no longer used?", "Which one isn't a good way to relax?",
           "According to the passage, which of the following did Jim not do?"]
NOT_INVERTED = ["Why didn't Tom go to school?", "Why was she not happy?", "The woman is not happy because _ .",
                # a negated attitude asks for the attitude ("not like": dislike), not an exception
                "What did Tom not like?", "What didn't Tom like?", "Which of the following does the writer not agree with?",
                # negated in a clause that is not what is asked
                "Which of the following places has Helen visited?", "What did Tom do after he did not pass the exam?",
                "What did Amy do when she could not find her dog?", "Which is true about the boys who didn't go?",
                "What did the boy do to make his mother not worry?",
                "What is wrong with Tom?", "Which of the following is true?", "How many states don't have the law?",
                "\"I don't know all these people\" means _ .", "Not all the kids are lucky because some of them _ .",
                "If you can't reach the food, what will you do?"]


@pytest.mark.parametrize("question", NEGATED)
def test_a_question_that_asks_for_the_option_that_does_not_fit_is_negated(question):
    assert negated_question(question)


@pytest.mark.parametrize("question", NOT_INVERTED)
def test_a_question_with_a_not_that_asks_for_what_fits_is_not_negated(question):
    assert negated_question(question) is None


def test_the_audit_flags_a_de_span_cut_inside_a_passage_word_with_the_attacks_check(ctx):
    """Issue 46: the attack and the audit ask one registered check; a release built before it is
    flagged. A DG option of the same text is not (a generated "man" is a word, not a cut)."""
    from advrace.core.examples import MCExample
    from advrace.core.provenance import AttackSummary, NewDistractors
    from advrace.release import audit as A

    passage = "Mr Boardman astonished the town. Later Lomax, a teacher, used the alphabet in his school."
    src = MCExample(id="q", passage=passage, question="Who used the alphabet?", label=0,
                    options=("A teacher.", "The town.", "A doctor.", "His father."))

    def flags(attack, new):
        options = (src.options[0], *new)
        record = NewDistractors(original=src.distractors, new=tuple(new))
        ex = src.replace_options(options).with_provenance(AttackSummary(attack, distractors=record))
        return [name for _, _, name, _ in A.audit_split(attack, [src], [ex], ctx).flags]

    flag = "distractor span cut inside a passage word"
    assert flags("distractor_extraction", ["Man astonished the town.", "Lomax.", "His school."]) == [flag]
    assert flag not in flags("distractor_extraction", ["Boardman.", "Lomax.", "His school."])
    assert flag not in flags("distractor_generation", ["Man astonished the town.", "Lomax.", "His school."])
