"""The slices probe (where accuracy drops): the probe (``probe``), the units a section hands it (``units``), and its
sections by kind of model: extractive readers' scored questions (``answers``) and taggers' sentences (``entities``)."""
