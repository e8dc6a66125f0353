import sys

from lpviz.cli import main

sys.exit(main())
