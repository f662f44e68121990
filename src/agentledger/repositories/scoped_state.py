"""Scoped state: key/value state shared beyond one session.

App state is shared by every session of an application, user state by every session
of one user of an application (Google ADK's ``app:`` and ``user:`` keys). Each is a
JSON object with its own revision: ``get`` (a scope nothing was stored for reads as
empty state at revision 0), ``save`` (replace, optimistic: a record read at another
revision raises ``ConflictError`` ``stale``), ``merge`` (a delta of keys to set and
delete, applied under the row lock, so concurrent merges never conflict and never lose
a key) and ``delete``. Deleting a session leaves them; only ``delete`` removes them.
"""

from __future__ import annotations

from typing import Any

from ..records import AppState, StateDelta, UserState
from . import _state
from ._base import Repository, operation


class AppStateRepository(Repository):
    """The single implementation of the app state operations."""

    @operation(writes=False)
    def get(self, app_name: str) -> AppState:
        """The state of application ``app_name`` (empty at revision 0 when none is stored).

        Raises:
            ValidationError: ``app_name`` is not 1 to 255 characters of text.
        """
        key = _state.APP.key_of((app_name,))
        result: AppState = _state.read(self._session, _state.APP, key)
        return result

    @operation(writes=True)
    def save(self, record: AppState) -> AppState:
        """Replace the application's state with the record's, if the stored revision is
        still the record's; returns it at the new revision (one more).

        Raises:
            ConflictError: reason ``stale`` when another writer changed it first.
            ValidationError: a state that cannot be stored.
        """
        settings = self._work.settings
        result: AppState = _state.save(
            self._session, _state.APP, record, settings.now(), settings.limits
        )
        return result

    @operation(writes=True)
    def merge(self, app_name: str, delta: StateDelta | dict[str, Any]) -> AppState:
        """Apply ``delta`` (keys to set, keys to delete) to the stored state under its row
        lock and bump the revision; never conflicts with another merge. Returns the state
        as merged. An empty delta changes nothing.

        Raises:
            ValidationError: a bad app_name, or a delta that is not a StateDelta (or a
                dict of one) of JSON values.
        """
        settings = self._work.settings
        key = _state.APP.key_of((app_name,))
        checked = _state.as_delta(delta, path="delta", limits=settings.limits)
        result: AppState = _state.merge(
            self._session, _state.APP, key, checked, settings.now(), settings.limits
        )
        return result

    @operation(writes=True)
    def delete(self, app_name: str) -> bool:
        """Delete the application's state; whether there was any."""
        return _state.remove(self._session, _state.APP, _state.APP.key_of((app_name,)))


class UserStateRepository(Repository):
    """The single implementation of the user state operations."""

    @operation(writes=False)
    def get(self, app_name: str, user_id: str) -> UserState:
        """The state of user ``user_id`` of application ``app_name`` (empty at revision 0
        when none is stored).

        Raises:
            ValidationError: ``app_name`` or ``user_id`` is not 1 to 255 characters of text.
        """
        key = _state.USER.key_of((app_name, user_id))
        result: UserState = _state.read(self._session, _state.USER, key)
        return result

    @operation(writes=True)
    def save(self, record: UserState) -> UserState:
        """Replace the user's state with the record's, if the stored revision is still the
        record's; returns it at the new revision (one more).

        Raises:
            ConflictError: reason ``stale`` when another writer changed it first.
            ValidationError: a state that cannot be stored.
        """
        settings = self._work.settings
        result: UserState = _state.save(
            self._session, _state.USER, record, settings.now(), settings.limits
        )
        return result

    @operation(writes=True)
    def merge(self, app_name: str, user_id: str, delta: StateDelta | dict[str, Any]) -> UserState:
        """Apply ``delta`` (keys to set, keys to delete) to the stored state under its row
        lock and bump the revision; never conflicts with another merge. Returns the state
        as merged. An empty delta changes nothing.

        Raises:
            ValidationError: a bad app_name or user_id, or a delta that is not a
                StateDelta (or a dict of one) of JSON values.
        """
        settings = self._work.settings
        key = _state.USER.key_of((app_name, user_id))
        checked = _state.as_delta(delta, path="delta", limits=settings.limits)
        result: UserState = _state.merge(
            self._session, _state.USER, key, checked, settings.now(), settings.limits
        )
        return result

    @operation(writes=True)
    def delete(self, app_name: str, user_id: str) -> bool:
        """Delete the user's state; whether there was any."""
        key = _state.USER.key_of((app_name, user_id))
        return _state.remove(self._session, _state.USER, key)
