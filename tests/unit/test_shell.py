import subprocess

from hypothesis import given, settings
from hypothesis import strategies as st

from gpunode import shell

# NUL cannot be carried in argv; everything else must survive.
args = st.lists(st.text(alphabet=st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",))),
                max_size=6)


@settings(max_examples=200, deadline=None)
@given(args)
def test_join_round_trips_through_a_real_shell(argv):
    out = subprocess.run(["sh", "-c", "printf '%s\\0' " + shell.join(argv) if argv else "true"],
                         capture_output=True, check=True).stdout
    got = out.decode("utf-8", "surrogateescape").split("\0")[:-1] if argv else []
    assert got == argv


def test_simple_words_stay_readable():
    assert shell.join(["pct", "exec", "200", "--", "ls", "-la", "/dev/shm"]) == "pct exec 200 -- ls -la /dev/shm"
    assert shell.join(["echo", ""]) == "echo ''"
    assert shell.join(["echo", "it's"]) == "echo 'it'\"'\"'s'"


def test_sh_passes_args_as_positional_parameters():
    argv = shell.sh('printf "%s" "$1"', "$(touch /tmp/pwned)")
    assert subprocess.run(argv, capture_output=True, text=True).stdout == "$(touch /tmp/pwned)"


def test_a_trailing_newline_is_quoted_not_left_to_end_the_command():
    # re's `$` also matches before a final newline: "0\n" once passed as a safe bare word
    assert shell.quote("0\n") == "'0\n'"
    assert shell.join(["echo", "x\n", "y"]) == "echo 'x\n' y"
