from kstool.base.errors import BusyError, KstoolError


class HistoryGoneError(KstoolError):
    """The state as of the start time is no longer kept (checkpoint history or input retention)."""


class PlanOutdatedError(BusyError):
    """The app ran between the plan and its application: plan again."""


class ReprocessStoppedError(KstoolError):
    """The run after the rollback failed: says where the app stands (it keeps the exit code of the cause)."""

    @classmethod
    def after(cls, cause: KstoolError, plan, where: str) -> "ReprocessStoppedError":
        error = cls(f"reprocess of {plan.app_id!r} stopped: {cause}. {where} (its state and offsets agree): "
                    "run the same reprocess again to finish it")
        error.exit_code = cause.exit_code
        return error
