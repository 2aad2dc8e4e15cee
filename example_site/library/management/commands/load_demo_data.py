"""Fill the library with demo authors, books, members and loans; safe to run again and again."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management.base import BaseCommand
from django.db import transaction

from example_site.library.models import LOAN_DAYS, Author, Book, Genre, Loan, Member, today


def isbn13(first12: str) -> str:
    """Append the ISBN-13 check digit (weights 1, 3, 1, 3, ...)."""
    total = sum(int(d) * (3 if i % 2 else 1) for i, d in enumerate(first12))
    return first12 + str((10 - total % 10) % 10)


AUTHORS = [
    # name, born, country, bio
    (
        "Jane Austen",
        1775,
        "England",
        "Novelist of manners, money and marriage among the English gentry.",
    ),
    (
        "Mary Shelley",
        1797,
        "England",
        "Novelist whose Frankenstein is often called the first science-fiction novel.",
    ),
    (
        "H. G. Wells",
        1866,
        "England",
        "Writer of scientific romances about time travel, invasion and invisibility.",
    ),
    (
        "Jules Verne",
        1828,
        "France",
        "Author of the Extraordinary Voyages, adventure novels built on the science of his day.",
    ),
    (
        "Arthur Conan Doyle",
        1859,
        "Scotland",
        "Physician and writer, creator of the detective Sherlock Holmes.",
    ),
    (
        "Agatha Christie",
        1890,
        "England",
        "Detective novelist, creator of Hercule Poirot, Tommy and Tuppence.",
    ),
    (
        "Charles Darwin",
        1809,
        "England",
        "Naturalist who set out the theory of evolution by natural selection.",
    ),
    (
        "Edward Gibbon",
        1737,
        "England",
        "Historian of the Roman Empire, celebrated for his prose and his irony.",
    ),
    (
        "Emily Dickinson",
        1830,
        "United States",
        "Poet of short, dense lyrics, almost all published after her death.",
    ),
    (
        "Lewis Carroll",
        1832,
        "England",
        "Mathematician and writer of nonsense, logic puzzles and Alice.",
    ),
    (
        "Frederick Douglass",
        1818,
        "United States",
        "Abolitionist, orator and writer who escaped slavery in 1838.",
    ),
    (
        "Mark Twain",
        1835,
        "United States",
        "Humorist and novelist of the Mississippi River and the American West.",
    ),
    (
        "George MacDonald",
        1824,
        "Scotland",
        "Minister and writer whose fairy tales shaped modern fantasy.",
    ),
]

BOOKS = [
    # first 12 ISBN digits, title, author, year, genre, copies, summary
    (
        "978000010001",
        "Pride and Prejudice",
        "Jane Austen",
        1813,
        Genre.FICTION,
        3,
        "Elizabeth Bennet and Mr Darcy misjudge each other, then slowly do not.",
    ),
    (
        "978000010002",
        "Emma",
        "Jane Austen",
        1815,
        Genre.FICTION,
        2,
        "A clever young woman plays matchmaker in her village, with poor results.",
    ),
    (
        "978000010003",
        "Persuasion",
        "Jane Austen",
        1817,
        Genre.FICTION,
        1,
        "Anne Elliot meets again the naval officer she was persuaded to refuse years before.",
    ),
    (
        "978000020001",
        "Frankenstein",
        "Mary Shelley",
        1818,
        Genre.SCIENCE_FICTION,
        2,
        "A young scientist makes a living creature and abandons it, with deadly consequences.",
    ),
    (
        "978000020002",
        "The Last Man",
        "Mary Shelley",
        1826,
        Genre.SCIENCE_FICTION,
        1,
        "A plague empties the world of the late twenty-first century, one person at a time.",
    ),
    (
        "978000030001",
        "The Time Machine",
        "H. G. Wells",
        1895,
        Genre.SCIENCE_FICTION,
        3,
        "A Victorian inventor travels to the year 802,701 and finds humanity divided in two.",
    ),
    (
        "978000030002",
        "The War of the Worlds",
        "H. G. Wells",
        1898,
        Genre.SCIENCE_FICTION,
        2,
        "Martians land in Surrey and nothing on Earth can stop them, almost.",
    ),
    (
        "978000030003",
        "The Invisible Man",
        "H. G. Wells",
        1897,
        Genre.SCIENCE_FICTION,
        1,
        "A scientist who has made himself invisible cannot make himself visible again.",
    ),
    (
        "978000040001",
        "Twenty Thousand Leagues Under the Seas",
        "Jules Verne",
        1870,
        Genre.SCIENCE_FICTION,
        2,
        "Captain Nemo takes three captives round the world's oceans in the submarine Nautilus.",
    ),
    (
        "978000040002",
        "Journey to the Centre of the Earth",
        "Jules Verne",
        1864,
        Genre.SCIENCE_FICTION,
        2,
        "A professor, his nephew and their guide climb down an Icelandic volcano.",
    ),
    (
        "978000040003",
        "Around the World in Eighty Days",
        "Jules Verne",
        1872,
        Genre.FICTION,
        3,
        "Phileas Fogg bets his fortune that he can circle the globe in eighty days.",
    ),
    (
        "978000050001",
        "A Study in Scarlet",
        "Arthur Conan Doyle",
        1887,
        Genre.MYSTERY,
        2,
        "Dr Watson meets Sherlock Holmes, and a body is found in an empty house in Brixton.",
    ),
    (
        "978000050002",
        "The Hound of the Baskervilles",
        "Arthur Conan Doyle",
        1902,
        Genre.MYSTERY,
        1,
        "A spectral hound is said to haunt the Baskerville family on Dartmoor.",
    ),
    (
        "978000050003",
        "The Sign of the Four",
        "Arthur Conan Doyle",
        1890,
        Genre.MYSTERY,
        2,
        "A missing father, yearly pearls and a stolen treasure from India.",
    ),
    (
        "978000060001",
        "The Mysterious Affair at Styles",
        "Agatha Christie",
        1920,
        Genre.MYSTERY,
        2,
        "Hercule Poirot's first case: a poisoning in an English country house.",
    ),
    (
        "978000060002",
        "The Secret Adversary",
        "Agatha Christie",
        1922,
        Genre.MYSTERY,
        1,
        "Tommy and Tuppence hunt for a secret treaty and a girl who vanished with it.",
    ),
    (
        "978000070001",
        "On the Origin of Species",
        "Charles Darwin",
        1859,
        Genre.SCIENCE,
        2,
        "The argument that species change through natural selection, with the evidence for it.",
    ),
    (
        "978000070002",
        "The Voyage of the Beagle",
        "Charles Darwin",
        1839,
        Genre.SCIENCE,
        1,
        "Darwin's journal of five years at sea: geology, wildlife and peoples of South America.",
    ),
    (
        "978000070003",
        "The Descent of Man",
        "Charles Darwin",
        1871,
        Genre.SCIENCE,
        1,
        "Evolution applied to humans, and the theory of sexual selection.",
    ),
    (
        "978000080001",
        "The History of the Decline and Fall of the Roman Empire",
        "Edward Gibbon",
        1776,
        Genre.HISTORY,
        1,
        "Thirteen centuries of Roman history, from the Antonines to the fall of Constantinople.",
    ),
    (
        "978000090001",
        "Poems",
        "Emily Dickinson",
        1890,
        Genre.POETRY,
        2,
        "The first selection of Dickinson's poems, published four years after her death.",
    ),
    (
        "978000100001",
        "Alice's Adventures in Wonderland",
        "Lewis Carroll",
        1865,
        Genre.CHILDREN,
        3,
        "Alice follows a white rabbit down a hole into a world of logic gone wrong.",
    ),
    (
        "978000100002",
        "Through the Looking-Glass",
        "Lewis Carroll",
        1871,
        Genre.CHILDREN,
        2,
        "Alice steps through a mirror into a land laid out like a chessboard.",
    ),
    (
        "978000110001",
        "Narrative of the Life of Frederick Douglass",
        "Frederick Douglass",
        1845,
        Genre.BIOGRAPHY,
        2,
        "Douglass's own account of his life in slavery and his escape to freedom.",
    ),
    (
        "978000110002",
        "My Bondage and My Freedom",
        "Frederick Douglass",
        1855,
        Genre.BIOGRAPHY,
        1,
        "A fuller autobiography, written ten years later as a free man and abolitionist.",
    ),
    (
        "978000120001",
        "The Adventures of Tom Sawyer",
        "Mark Twain",
        1876,
        Genre.CHILDREN,
        2,
        "A boy's summers on the Mississippi: whitewashing, treasure and a murder witnessed.",
    ),
    (
        "978000120002",
        "Adventures of Huckleberry Finn",
        "Mark Twain",
        1884,
        Genre.FICTION,
        2,
        "Huck and Jim, who has escaped slavery, travel down the Mississippi on a raft.",
    ),
    (
        "978000120003",
        "Life on the Mississippi",
        "Mark Twain",
        1883,
        Genre.BIOGRAPHY,
        1,
        "Twain's memoir of learning to pilot steamboats, and of the river twenty years on.",
    ),
    (
        "978000130001",
        "Phantastes",
        "George MacDonald",
        1858,
        Genre.FANTASY,
        1,
        "A young man wanders for twenty-one days through the strange country of Fairy Land.",
    ),
    (
        "978000130002",
        "The Princess and the Goblin",
        "George MacDonald",
        1872,
        Genre.FANTASY,
        2,
        "Princess Irene and the miner's son Curdie foil the goblins living under the mountain.",
    ),
]

MEMBERS = [
    # username, first name, last name, max loans
    ("alice", "Alice", "Archer", 5),
    ("bob", "Bob", "Baker", 5),
    ("carol", "Carol", "Chen", 8),
]

LOANS = [
    # first 12 ISBN digits, username, borrowed days ago, returned days ago (None: still out)
    ("978000050002", "alice", 5, None),  # the only copy of The Hound of the Baskervilles
    ("978000010001", "alice", 10, None),
    ("978000020001", "bob", 30, None),  # overdue by nine days
    ("978000010002", "carol", 40, 25),
    ("978000070001", "carol", 3, None),
    ("978000030001", "reader", 2, None),
]


class Command(BaseCommand):
    help = (
        "Create the example library's demo data: authors, books, members, loans, the superuser admin/admin "
        "the librarian librarian/librarian (staff, catalogue and desk permissions) and the non-staff user reader/reader. Existing rows are kept, so it is safe to run repeatedly."
    )

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> None:
        created: dict[str, int] = {"authors": 0, "books": 0, "users": 0, "members": 0, "loans": 0}
        authors: dict[str, Author] = {}
        for name, born, country, bio in AUTHORS:
            authors[name], new = Author.objects.get_or_create(
                name=name, defaults={"born": born, "country": country, "bio": bio}
            )
            created["authors"] += new
        for first12, title, author, year, genre, copies, summary in BOOKS:
            _, new = Book.objects.get_or_create(
                isbn=isbn13(first12),
                defaults={
                    "title": title,
                    "author": authors[author],
                    "published": year,
                    "genre": genre,
                    "copies": copies,
                    "summary": summary,
                },
            )
            created["books"] += new

        User = get_user_model()
        # Users are only created, never reset: someone may have changed a demo password on purpose.
        if not User.objects.filter(username="admin").exists():
            User.objects.create_superuser("admin", "admin@example.com", "admin")
            created["users"] += 1
        reader = User.objects.filter(username="reader").first()
        if reader is None:
            reader = User.objects.create_user(
                "reader", "reader@example.com", "reader", first_name="Demo", last_name="Reader"
            )
            created["users"] += 1
        _, new = Member.objects.get_or_create(user=reader)
        created["members"] += new
        # A librarian: staff with the catalogue and desk permissions, but not a superuser, so
        # the admin and MCP show what Django's permissions allow and nothing more.
        librarian = User.objects.filter(username="librarian").first()
        if librarian is None:
            librarian = User.objects.create_user(
                "librarian",
                "librarian@example.com",
                "librarian",
                first_name="Demo",
                last_name="Librarian",
                is_staff=True,
            )
            created["users"] += 1
            codenames = [
                "view_book",
                "add_book",
                "change_book",
                "view_author",
                "view_loan",
                "change_loan",
                "view_member",
            ]
            librarian.user_permissions.set(
                Permission.objects.filter(content_type__app_label="library", codename__in=codenames)
            )
        for username, first, last, max_loans in MEMBERS:
            user = User.objects.filter(username=username).first()
            if user is None:
                # Members who only borrow at the desk: no password to log in with.
                user = User.objects.create_user(
                    username, f"{username}@example.com", None, first_name=first, last_name=last
                )
                created["users"] += 1
            _, new = Member.objects.get_or_create(user=user, defaults={"max_loans": max_loans})
            created["members"] += new

        now = today()
        for first12, username, borrowed_ago, returned_ago in LOANS:
            book = Book.objects.get(isbn=isbn13(first12))
            member = Member.objects.get(user__username=username)
            # One demo loan per (book, member): running again on a later day adds nothing.
            if Loan.objects.filter(book=book, member=member).exists():
                continue
            borrowed_on = now - timedelta(days=borrowed_ago)
            Loan.objects.create(
                book=book,
                member=member,
                borrowed_on=borrowed_on,
                due_on=borrowed_on + timedelta(days=LOAN_DAYS),
                returned_on=None if returned_ago is None else now - timedelta(days=returned_ago),
            )
            created["loans"] += 1

        summary = ", ".join(f"{count} {what}" for what, count in created.items())
        self.stdout.write(self.style.SUCCESS(f"Demo data ready (created {summary})."))
        self.stdout.write(
            f"The catalogue holds {Author.objects.count()} authors, {Book.objects.count()} books, "
            f"{Member.objects.count()} members and {Loan.objects.open().count()} open loans."
        )
