import json

import pytest
from django.core.management import CommandError, call_command

from taxonomy.mast_files import TaxonomyFileError, build_taxonomy, parse_definitions
from taxonomy.models import Taxonomy, TaxonomyVersion
from tests.conftest_paths import FIXTURES


def test_definitions_split_into_code_name_and_multiline_definition():
    modes = parse_definitions((FIXTURES / "taxonomy" / "definitions_small.txt").read_text())
    assert [(m["code"], m["name"]) for m in modes] == [
        ("1.1", "Ignore The Brief"),
        ("1.2", "Loop Forever"),
        ("2.1", "Silent Partner"),
    ]
    assert modes[0]["definition"].endswith("every stated constraint counts.")


def test_examples_attach_to_modes_by_name_case_insensitively():
    data = build_taxonomy(
        (FIXTURES / "taxonomy" / "definitions_small.txt").read_text(),
        (FIXTURES / "taxonomy" / "examples_small.txt").read_text(),
        name="Small",
    )
    by_code = {m["code"]: m for m in data["modes"]}
    assert "JSON parser" in by_code["1.1"]["examples"]
    assert "shall we start" in by_code["1.2"]["examples"]
    assert "examples" not in by_code["2.1"]
    assert [c["code"] for c in data["categories"]] == ["1", "2"]


def test_duplicate_code_in_definitions_is_refused_with_its_line():
    with pytest.raises(TaxonomyFileError, match=r"line 3: duplicate code 1.1"):
        parse_definitions("1.1 A:\ndef a\n1.1 B:\ndef b\n")


def test_example_heading_for_unknown_mode_is_refused():
    with pytest.raises(TaxonomyFileError, match="'Totally Different Thing' names no mode"):
        build_taxonomy("1.1 A thing:\ndef\n", "### Totally Different Thing ###\nbody\n", name="X")


def test_import_command_reads_the_official_mast_files(db, shared_dir):
    tax = shared_dir / "mast" / "taxonomy"
    call_command(
        "taxonomy_import", str(tax / "definitions.txt"), examples=str(tax / "examples.txt"), name="MAST official"
    )
    version = TaxonomyVersion.objects.get(taxonomy__name="MAST official")
    assert version.is_published
    assert version.modes.count() == 14
    # The file's own names are kept (they differ from the paper for 3.2 and 3.3).
    assert version.modes.get(code="3.2").name == "Weak Verification"
    assert version.modes.get(code="3.3").name == "No or Incorrect Verification"
    assert version.modes.get(code="1.3").examples  # examples attached
    assert not version.modes.get(code="2.2").examples  # the file has none for 2.2


def test_import_command_with_bad_file_writes_nothing(db, tmp_path):
    bad = tmp_path / "definitions.txt"
    bad.write_text("1.1 A:\ndef\n1.1 A again:\ndef\n")
    before = TaxonomyVersion.objects.count()
    with pytest.raises(CommandError, match="duplicate code 1.1"):
        call_command("taxonomy_import", str(bad), name="Broken")
    assert TaxonomyVersion.objects.count() == before
    assert not Taxonomy.objects.filter(name="Broken").exists()


def test_export_then_import_round_trips_a_version(mast_version, tmp_path, capsys):
    out = tmp_path / "mast.json"
    call_command("taxonomy_export", "MAST", "1", out=str(out))
    data = json.loads(out.read_text())
    data["name"] = "MAST copy"
    out.write_text(json.dumps(data))
    call_command("taxonomy_import", str(out))
    copy = TaxonomyVersion.objects.get(taxonomy__name="MAST copy")
    assert list(copy.modes.values_list("code", "name", "definition")) == list(
        mast_version.modes.values_list("code", "name", "definition")
    )


def test_invalid_json_names_the_line(db, tmp_path):
    bad = tmp_path / "t.json"
    bad.write_text('{\n  "name": "X",\n  "modes": [,]\n}')
    with pytest.raises(CommandError, match=r"line 3: invalid JSON"):
        call_command("taxonomy_import", str(bad))
