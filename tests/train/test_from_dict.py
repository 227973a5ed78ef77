"""The one schema mechanism every YAML file goes through: ``from_dict`` / ``from_file``."""

from dataclasses import dataclass, field
from typing import ClassVar

import pytest

from rlvr.train.overrides import NOT_A_KEY, from_dict, from_file


@dataclass(frozen=True)
class Item:
    SCALAR_KEY: ClassVar[str] = "recipe"

    recipe: str
    label: str = ""

    def __post_init__(self) -> None:
        if self.label == "bad":
            raise ValueError("label must not be bad")


@dataclass(frozen=True)
class Book:
    LABEL: ClassVar[str] = "a book"

    items: tuple[Item, ...] = ()
    title: str = ""
    source: str = field(default="", metadata=NOT_A_KEY)


def test_a_scalar_sets_the_field_its_class_names():
    book = from_dict(Book, {"items": ["a", {"recipe": "b", "label": "B"}]})
    assert book.items == (Item("a"), Item("b", "B"))


def test_unknown_keys_are_named_in_one_line_with_the_valid_ones():
    with pytest.raises(
        ValueError, match=r"^unknown key 'titel'; valid keys of a book: items, title$"
    ):
        from_dict(Book, {"titel": "x"})
    with pytest.raises(
        ValueError, match=r"unknown key 'items\[1\]\.lable'; valid keys of items\[1\]"
    ):
        from_dict(Book, {"items": ["a", {"recipe": "b", "lable": "B"}]})


def test_a_field_the_code_sets_is_no_key_of_the_file():
    with pytest.raises(ValueError, match="unknown key 'source'"):
        from_dict(Book, {"source": "elsewhere"})


def test_from_file_starts_every_error_with_the_file_and_names_the_failing_item():
    with pytest.raises(ValueError, match=r"^shelf\.yaml: items\[0\]: label must not be bad$"):
        from_file(Book, {"items": [{"recipe": "a", "label": "bad"}]}, "shelf.yaml")
    assert from_file(Book, None, "empty.yaml") == Book()
