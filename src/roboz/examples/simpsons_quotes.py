"""A handful of Simpsons quotes for the examples."""

QUOTES: tuple[str, ...] = (
    "D'oh!",
    "Mmm... donuts.",
    "Eat my shorts!",
    "Excellent.",
    "I'm Idaho!",
    "Me fail English? That's unpossible.",
    "To alcohol! The cause of, and solution to, all of life's problems.",
    "Okily dokily!",
    "Ha-ha!",
    "Everything's coming up Milhouse!",
    "I am so smart! S-M-R-T!",
    "Worst. Episode. Ever.",
)
