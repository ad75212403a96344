"""The `gpunode` program: Invoke's Program with gpunode's own core options only.

Invoke's core options steer its `c.run()` (echo, dry, pty, hide, warn-only, sudo password, command
timeout) and its own config files; no gpunode task runs a command through them, so `gpunode --help`
would list options that do nothing, one of them pyinfra's dry-run flag (`--dry`) making a real run.
What is left: help, version, listing the tasks and shell completion.
"""

from __future__ import annotations

from invoke import Exit, Program
from invoke.completion.complete import print_completion_script
from invoke.exceptions import ParseError
from invoke.parser import Argument

from gpunode.cli import habits

#: Invoke's core options that gpunode keeps; every other one is refused by gpunode.cli.habits.
KEPT = ("complete", "help", "list", "list-depth", "list-format", "print-completion-script", "version")


#: ansible-playbook's options that mean the same for every task that reaches a target.
ANSIBLE = [
    Argument(names=("become", "b"), kind=bool, default=False,
             help="Run commands as root (or --become-user) through sudo on every SSH host, as the inventory's "
                  "`become: true` (Ansible's -b)."),
    Argument(names=("become-user",), help="The user sudo runs commands as with --become (default root)."),
    Argument(names=("user", "u"), help="Log in to every host as this user, over the inventory's `user:` "
                                       "(Ansible's -u)."),
    Argument(names=("list-hosts",), kind=bool, default=False,
             help="Print the targets the task would reach and stop (Ansible's --list-hosts)."),
]


class GpunodeProgram(Program):
    def core_args(self) -> list[Argument]:
        return [a for a in super().core_args() if a.name in KEPT] + [_fresh(a) for a in ANSIBLE]

    def task_args(self) -> list[Argument]:
        return []  # -c/--collection, --search-root, --no-dedupe: the task tree is bundled

    def parse_core(self, argv: list[str] | None) -> None:
        # Program.parse_core without the options dropped above (--write-pyc, --debug).
        self.normalize_argv(argv)
        self.argv = habits.translate(self.argv)
        self.parse_core_args()
        if self.args.version.value:
            self.print_version()
            raise Exit
        if self.args["print-completion-script"].value:
            print_completion_script(shell=self.args["print-completion-script"].value, names=self.binary_names)
            raise Exit

    def parse_tasks(self) -> None:
        try:
            super().parse_tasks()
        except ParseError as exc:
            said = habits.refusal(str(exc))
            if said is None:
                raise
            raise Exit(said, code=2) from None

    def update_config(self, merge: bool = True) -> None:
        # Nothing parsed feeds Invoke's config: no run() options, no runtime config file (-f).
        habits.given = habits.Given(become=bool(self.args.become.value) or bool(self.args["become-user"].value),
                                    become_user=self.args["become-user"].value, user=self.args.user.value,
                                    list_hosts=bool(self.args["list-hosts"].value))
        if merge:
            self.config.merge()


def _fresh(arg: Argument) -> Argument:
    """A copy: an Argument holds its parsed value, and tests run several programs in one process."""
    return Argument(names=arg.names, kind=arg.kind, default=arg.default, help=arg.help)
