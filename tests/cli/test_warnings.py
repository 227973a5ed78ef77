"""How the sub-commands print warnings (in a child Python: pytest captures warnings itself)."""

import subprocess
import sys

BODY = """
import warnings
from rlvr.cli.common import command

@command
def body(argv):
    compile("x = 1\\nif x is 'a': pass\\n", "<dependency>", "exec")  # a SyntaxWarning
    warnings.warn("groups carry no signal", stacklevel=1)

raise SystemExit(body([]))
"""


def test_warnings_are_one_line_and_a_dependency_s_syntax_warning_is_dropped():
    done = subprocess.run([sys.executable, "-c", BODY], capture_output=True, text=True, check=False)
    assert done.returncode == 0
    assert done.stderr == "warning: groups carry no signal\n"
