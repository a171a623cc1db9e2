import sys

from device_matrix.cli import main

sys.exit(main())
