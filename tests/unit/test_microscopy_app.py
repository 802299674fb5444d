"""app=microscopy without Ray: localisation files are validated, bad lines named."""
import pytest

from pairflow.apps.microscopy import MicroscopyApp, read_localisations
from pairflow.engine.errors import InputError


def test_localisations_are_read_and_bad_lines_named(tmp_path):
    pts = read_localisations("p.csv", b"x,y\n1,2\n3.5,-4\n\n5,6e1\n")
    assert pts.tolist() == [[1, 2], [3.5, -4], [5, 60]]
    for raw, pattern in [
        (b"1,2\n3,4\n5,6\n", "first line must be the header 'x,y'"),
        (b"x,y\n1,2\n3,four\n5,6\n", r"record 'line 3'.*not two numbers"),
        (b"x,y\n1,2\n3,nan\n5,6\n", r"record 'line 3'.*not finite"),
        (b"x,y\n1,2\n3,4\n", "2 localisations: a particle needs at least 3"),
    ]:
        with pytest.raises(InputError, match=pattern):
            read_localisations("p.csv", raw)


def test_app_checks_names_and_scale(tmp_path):
    a = tmp_path / "p1.csv"
    a.write_text("x,y\n1,2\n3,4\n5,7\n")
    (tmp_path / "d").mkdir()
    b = tmp_path / "d" / "p1.csv"
    b.write_text(a.read_text())
    with pytest.raises(InputError, match="same name 'p1'"):
        MicroscopyApp([str(a), str(b)])
    with pytest.raises(ValueError, match="scale"):
        MicroscopyApp([str(a)], scale=0)
    app = MicroscopyApp([str(a)])
    bad = b"x,y\n1,2\n1;2\n"
    with pytest.raises(InputError, match=r"p1\.csv: record 'line 3'"):
        app.check("p1", bad)
