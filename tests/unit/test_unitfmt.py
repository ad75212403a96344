"""systemd quoting (the lab reads the units back with `systemctl show`)."""

import pytest

from gpunode.steps.unitfmt import UnitValueError, env_line, exec_line, unit_path, unit_text

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


def test_exec_word_writes_control_characters_as_c_escapes_and_refuses_nul():
    assert exec_line(["/bin/echo", "a\rb", "t\tx", "\x01"]) == '/bin/echo "a\\rb" "t\\tx" "\\x01"'
    with pytest.raises(UnitValueError, match="extra_args=.*NUL"):
        exec_line(["/bin/echo", "a\x00b"], "extra_args")


def test_a_lone_semicolon_stays_an_argument():
    assert exec_line(["/bin/echo", ";", "a;b"]) == '/bin/echo \\; "a;b"'


def test_a_command_line_starts_with_an_absolute_path():
    with pytest.raises(UnitValueError, match="absolute path"):
        exec_line(["python3", "-V"])


def test_env_values_escape_dollar_and_backtick_and_refuse_control_characters():
    assert env_line("A", "$HOME `id` \\") == 'A="\\$HOME \\`id\\` \\\\"'
    for bad in ("a\nB=1", "a\rb", "a\x00b"):
        with pytest.raises(UnitValueError, match="DEMO_GREETING="):
            env_line("DEMO_GREETING", bad)


def test_unit_text_doubles_percent_and_refuses_what_would_end_or_join_the_line():
    assert unit_text("100% on %H") == "100%% on %%H"
    for bad in ("a\nExecStartPre=/bin/x", "a\rb", "ends in \\"):
        with pytest.raises(UnitValueError, match="model_source="):
            unit_text(bad, "model_source")


def test_unit_path_quotes_a_path_with_spaces_only_where_a_list_of_paths_is_read():
    assert unit_path("/mnt/my models/Q\"1\"", word=True) == '"/mnt/my models/Q\\"1\\""'
    assert unit_path("/mnt/my models") == "/mnt/my models"
    for bad in ("relative/x", "/mnt/back\\slash"):
        with pytest.raises(UnitValueError):
            unit_path(bad)


def test_unit_templates_refuse_a_raw_string():
    from gpunode.errors import StepError
    from gpunode.steps.render import render

    with pytest.raises(StepError, match="raw value"):
        render("servers/router.service.j2", {"workers": 2, "policy": "x\n[Service]", "server_units": "",
                                             "env_file": "", "workdir": "", "exec_start": ""})
