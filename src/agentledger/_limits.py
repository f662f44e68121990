"""Column and value limits: what the tables hold, read by the models (column sizes),
the input checks, the records and the integrations (what they refuse before any SQL).

Pure constants, in one place, so that a check never needs the model that declares its
column (records and limits are the wire shape, not the storage shape).
"""

from __future__ import annotations

MAX_SCOPE_LENGTH = 255
"""The longest app_name or user_id (characters)."""
MAX_EXTERNAL_KEY_LENGTH = 1024
"""The longest external key of a session (characters)."""
MAX_ROLE_LENGTH = 255
"""The longest role of a message (characters)."""
MAX_ROW_KEY_LENGTH = 255
"""The longest external key of a message or a step (characters)."""
MAX_CAPABILITY_LENGTH = 4096
"""The longest capability a grant names (characters)."""
TOKEN_LIMIT = 2**63 - 1
"""The largest token total a session holds (its BIGINT columns)."""

MAX_NAMESPACE_LENGTH = 255
"""The longest LangGraph checkpoint namespace (characters): a subgraph path
``node:task|...``."""
MAX_CHECKPOINT_ID_LENGTH = 64
"""The longest LangGraph checkpoint id (LangGraph's are 36-character UUIDs)."""
MAX_TASK_ID_LENGTH = 255
"""The longest task id of a LangGraph pending write."""
MAX_CHANNEL_LENGTH = 255
"""The longest LangGraph channel name."""
MAX_VERSION_LENGTH = 128
"""The longest LangGraph channel version, as text."""
MAX_TYPE_LENGTH = 64
"""The longest serializer type tag (``msgpack``, ``json``, ``bytes``...)."""

MAX_MEMORY_NAMESPACE_LENGTH = 512
"""The longest namespace of a memory item, as stored: its labels joined by ``.``
(each ``.``, ``%``, control character and trailing space of a label escaped:
``%2E``, ``%25``, ``%0A``, ``%20``). With the key, the
primary key stays within MariaDB/MySQL's 3,072 bytes of index (767 characters of
utf8mb4)."""
MAX_MEMORY_KEY_LENGTH = 255
"""The longest key of a memory item (characters)."""
MAX_MEMORY_PAGE = 10_000
"""The most memory items or namespaces one search or listing returns."""
MAX_EMBEDDING_PATH_LENGTH = 255
"""The longest path of an embedded field of a memory item (``text``, ``items[*].body``)."""
