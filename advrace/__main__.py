import sys

from advrace.cli import main

sys.exit(main())
