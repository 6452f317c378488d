"""The heartbeat page's layout, as common/heartbeat_layout.h defines it: the
Python side's one copy, used by every install of the package (the agent's
embedded one, pip's, the .deb's). tests/python/test_layout.py reads the C
header and fails when a value here differs from it or one is missing.

Every multi-byte field is in the machine's own byte order, as C writes it.
"""

# The header's CXXRUN_HEARTBEAT_<NAME> macros.
ENV = "CXXRUN_HEARTBEAT_FILE"
MAGIC = 0x42484E5552585843  # "CXXRUNHB"
VERSION = 1
SECTIONS = 16
NAME_MAX = 32  # bytes, the NUL included
PAGE_SIZE = 4096

# struct cxxrun_heartbeat_page: each field's byte offset (PAGE_<FIELD>_AT).
PAGE_MAGIC_AT = 0  # uint64
PAGE_VERSION_AT = 8  # uint32
PAGE_SECTION_COUNT_AT = 12  # uint32
PAGE_OWNER_PID_AT = 16  # uint64
PAGE_BEATS_AT = 24  # uint64
PAGE_LAST_BEAT_NS_AT = 32  # uint64
PAGE_STEP_AT = 40  # uint64
PAGE_STEP_NS_AT = 48  # uint64
PAGE_JUDGED_AT = 56  # uint64
PAGE_SECTIONS_AT = 64  # SECTIONS slots of SECTION_SIZE bytes

# struct cxxrun_heartbeat_section: its size and each field's offset in a slot.
SECTION_SIZE = 64
SECTION_SEQ_AT = 0  # uint64
SECTION_STARTED_NS_AT = 8  # uint64
SECTION_TIMEOUT_NS_AT = 16  # uint64
SECTION_ACTIVE_AT = 24  # uint32
SECTION_NAME_AT = 32  # NAME_MAX bytes
