"""The package's copy of the heartbeat page layout (agent/python/cxxrun/_layout.py)
is common/heartbeat_layout.h's, value for value: a change to one without the
other fails here. Every install of the package (the agent's embedded copy,
pip's, the .deb's) is built from that one file."""
import ctypes
import re

from conftest import HEADER, LAYOUT, fresh_cxxrun


def _module_layout():
    fresh_cxxrun()
    import cxxrun._layout as layout
    return {name: value for name, value in vars(layout).items() if name.isupper()}


def _header_fields(struct_type, prefix):
    return {f"{prefix}_{name.upper()}_AT": getattr(struct_type, name).offset
            for name, _ in struct_type._fields_ if name != "reserved"}


def test_the_header_parser_agrees_with_the_header_static_asserts():
    # The offsets this file computes from the declarations are the ones the
    # C compiler checks (CXXRUN_HB_ASSERT), so the parser reads them right.
    with open(HEADER) as f:
        text = f.read()
    structs = {"cxxrun_heartbeat_page": LAYOUT.page, "cxxrun_heartbeat_section": LAYOUT.section}
    asserts = re.findall(r"offsetof\(struct (\w+), (\w+)\) == (\d+)", text)
    assert len(asserts) >= 6
    for struct_name, field, offset in asserts:
        assert getattr(structs[struct_name], field).offset == int(offset), (struct_name, field)
    size = re.search(r"sizeof\(struct cxxrun_heartbeat_section\) == (\d+)", text)
    assert ctypes.sizeof(LAYOUT.section) == int(size.group(1))


def test_every_macro_has_the_same_value_in_the_package():
    module = _module_layout()
    assert LAYOUT.macros, "no CXXRUN_HEARTBEAT_* macro found in the header"
    for name, value in LAYOUT.macros.items():
        assert name in module, f"CXXRUN_HEARTBEAT_{name} has no {name} in cxxrun/_layout.py"
        assert module[name] == value, f"{name}: header {value!r}, cxxrun/_layout.py {module[name]!r}"


def test_every_field_has_the_same_offset_in_the_package():
    module = _module_layout()
    header = {**_header_fields(LAYOUT.page, "PAGE"), **_header_fields(LAYOUT.section, "SECTION"),
              "SECTION_SIZE": ctypes.sizeof(LAYOUT.section)}
    for name, offset in header.items():
        assert module.get(name) == offset, f"{name}: header {offset}, cxxrun/_layout.py {module.get(name)}"
    # And nothing the header no longer has: a field removed or renamed there.
    extra = set(module) - set(header) - set(LAYOUT.macros)
    assert not extra, f"cxxrun/_layout.py has {sorted(extra)}, which common/heartbeat_layout.h does not"


def test_the_page_fits_and_its_words_are_aligned():
    module = _module_layout()
    assert ctypes.sizeof(LAYOUT.page) <= module["PAGE_SIZE"]
    for name, value in module.items():
        if name.endswith("_AT") and name not in ("PAGE_SECTIONS_AT", "SECTION_NAME_AT"):
            width = 4 if name in ("PAGE_VERSION_AT", "PAGE_SECTION_COUNT_AT", "SECTION_ACTIVE_AT") else 8
            assert value % width == 0, name  # the package writes each field as one word
