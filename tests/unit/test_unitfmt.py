"""systemd quoting (the lab reads the units back with `systemctl show`)."""

import pytest

from gpunode.steps.unitfmt import env_line, exec_line

ARGS = ["/opt/v/bin/python", "-m", "sglang.launch_server", "--model-loader-extra-config",
        '{"enable_multithread_load": "true", "num_threads": 64}', "100%", "$HOME", "a b", "back\\slash"]


def test_exec_line_quotes_only_what_needs_it():
    line = exec_line(ARGS)
    assert line.startswith("/opt/v/bin/python -m sglang.launch_server --model-loader-extra-config ")
    assert '"{\\"enable_multithread_load\\": \\"true\\", \\"num_threads\\": 64}"' in line
    assert '"100%%"' in line and '"$$HOME"' in line and '"a b"' in line and '"back\\\\slash"' in line


def test_env_line_escapes_quotes_and_backslashes():
    assert env_line("A", 'x "y" \\z') == 'A="x \\"y\\" \\\\z"'
    with pytest.raises(ValueError):
        env_line("BAD-NAME", "x")
