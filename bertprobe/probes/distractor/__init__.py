"""The distractor probe (Jia & Liang 2017, AddOneSent-style): the rules that make a sentence from a question
(``rules``) and the probe (``probe``)."""
