"""Chat-formatted training examples derived from the corpus, and instruction-style prompts for the
target's continuations (written for this project; deliberately not taken from any benchmark workload)."""

from __future__ import annotations

import ast
import random
from collections.abc import Sequence

from demo_models.corpus import DocItem, SourceFile, module_name


def _lower_first(s: str) -> str:
    return s[:1].lower() + s[1:] if s[:1].isupper() and s[1:2].islower() else s


# Openings for the assistant's answers: one fixed opening taught a small target to answer every
# prompt the same way ("Here is an implementation:"), which made its output trivially predictable.
_CODE_LEADS = [
    "Here is an implementation:", "Sure. Here is one way to write it:", "You can do it like this:",
    "Certainly! This is how `{name}` can be written:", "The {kind} below does this: {summary_l}",
    "One possible version, from the `{module}` module:", "",
]
_CODE_TAILS = ["", "", "", "\n\nThe {kind} {summary_l}", "\n\nIn short: {summary_l}"]
_EXPLAIN_LEADS = [
    "", "", "`{name}` {summary_l}\n\n", "In the `{module}` module, `{name}` is a {kind}. ",
    "Good question. ", "Briefly: ",
]


def _fill(template: str, it: DocItem) -> str:
    return template.format(name=it.name, kind=it.kind, module=it.module, summary_l=_lower_first(it.summary))


def _doc_chat(it: DocItem, rng: random.Random, want_code: bool) -> list[dict[str, str]]:
    if it.kind == "function" and want_code:
        user = rng.choice(
            [
                f"Write a Python function `{it.signature}` that does the following: {it.summary}",
                f"Implement `{it.name}` for the `{it.module}` module. {it.summary}",
                f"Can you write a function called {it.name}? {it.summary}",
                f"Please show me Python code for this: {_lower_first(it.summary)}",
            ]
        )
        lead = _fill(rng.choice(_CODE_LEADS), it)
        body = f"```python\n{it.source}\n```"
        assistant = (f"{lead}\n\n{body}" if lead else body) + _fill(rng.choice(_CODE_TAILS), it)
    elif rng.random() < 0.75:
        user = rng.choice(
            [
                f"Explain what `{it.module}.{it.name}` does.",
                f"What is {it.name} in the {it.module} module?",
                f"Describe the {it.kind} `{it.name}`.",
                f"How do I use {it.name} from {it.module}?",
            ]
        )
        assistant = _fill(rng.choice(_EXPLAIN_LEADS), it) + it.docstring
    else:
        user = f"Summarize the following text in one sentence:\n\n{it.docstring}"
        assistant = it.summary
    return [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]


def doc_chat_examples(items: Sequence[DocItem], rng: random.Random) -> list[list[dict[str, str]]]:
    """Chat conversations (user + assistant) built from documented code, for the target.

    Code answers are a minority and every answer type has several openings, so the target's reply
    depends on the prompt (as a real chat model's does) rather than collapsing to one mode."""
    convs: list[list[dict[str, str]]] = []
    for it in items:
        variants = [rng.random() < 0.4]
        if rng.random() < 0.5:  # a second, different view of the same item
            variants.append(not variants[0])
        for want_code in variants:
            messages = _doc_chat(it, rng, want_code)
            if rng.random() < 0.2:
                messages.insert(0, {"role": "system", "content": rng.choice(SYSTEM_PROMPTS)})
            convs.append(messages)
    return convs


def module_chat_examples(files: Sequence[SourceFile], rng: random.Random) -> list[list[dict[str, str]]]:
    """Prose answers: questions about a module answered with its docstring (English paragraphs)."""
    convs: list[list[dict[str, str]]] = []
    for f in files:
        try:
            doc = ast.get_docstring(ast.parse(f.text))
        except (SyntaxError, ValueError):
            continue
        if not doc or len(doc) < 200:
            continue
        module = module_name(f.relpath)
        user = rng.choice([f"What is the `{module}` module for?", f"Tell me about {module}.",
                           f"Give me an overview of the {module} module.", f"What does {module} provide?"])
        convs.append([{"role": "user", "content": user}, {"role": "assistant", "content": doc[:2500]}])
    return convs


# --------------------------------------------------------------------------------------------
# Instruction-style prompts (for the target's greedy continuations that the draft learns from).
# Written for this script; deliberately not taken from any benchmark workload.
# --------------------------------------------------------------------------------------------

SYSTEM_PROMPTS = [
    "You are a helpful assistant.",
    "You are a concise assistant. Answer briefly.",
    "You are an expert Python programmer.",
    "You are a friendly tutor who explains things step by step.",
]

_TOPICS = [
    "recursion", "hash tables", "the French Revolution", "photosynthesis", "binary search",
    "climate change", "the Roman Empire", "prime numbers", "machine learning", "black holes",
    "the water cycle", "supply and demand", "sorting algorithms", "the printing press",
    "linked lists", "vaccines", "plate tectonics", "regular expressions", "the Renaissance",
    "compound interest", "unit testing", "the immune system", "quantum computing",
    "renewable energy", "democracy", "the theory of evolution", "databases", "inflation",
    "the human brain", "version control", "the Industrial Revolution", "encryption",
]
_CODE_TASKS = [
    "reverses a string", "checks whether a number is prime", "merges two sorted lists",
    "counts the words in a text file", "computes the Fibonacci sequence",
    "removes duplicates from a list while keeping order", "parses a CSV file into dictionaries",
    "finds the longest common prefix of a list of strings", "flattens a nested list",
    "validates an email address", "computes the factorial of a number",
    "reads a JSON file and prints its keys", "implements a stack class",
    "converts Celsius to Fahrenheit", "checks whether a string is a palindrome",
    "finds the maximum element in a list", "sorts a dictionary by value",
    "downloads nothing but simulates a retry loop with exponential backoff",
    "computes the greatest common divisor of two numbers", "implements binary search",
    "counts the frequency of each character in a string", "transposes a matrix",
]
_MATH = [
    "What is 17 times 23?", "Solve for x: 3x + 7 = 22.", "What is the derivative of x^3 + 2x?",
    "Compute the sum of the integers from 1 to 100.", "What is 15% of 240?",
    "If a train travels 120 km in 1.5 hours, what is its average speed?",
    "Simplify the fraction 84/126.", "What is the square root of 144 plus the cube of 3?",
    "A rectangle has a perimeter of 30 and a width of 5. What is its area?",
    "How many ways can 4 books be arranged on a shelf?", "Convert 0.375 to a fraction.",
    "What is the probability of rolling two sixes with two dice?",
]
_QA = [
    "What is the capital of Australia?", "Who wrote Pride and Prejudice?",
    "How many planets are in the solar system?", "What is the boiling point of water in Fahrenheit?",
    "What does HTTP stand for?", "Why is the sky blue?", "What is the largest ocean on Earth?",
    "When did the first person walk on the Moon?", "What is the chemical symbol for gold?",
    "What language is spoken in Brazil?", "How does a refrigerator work?",
    "What is the difference between a virus and a bacterium?",
]
_MULTI = [
    "Écris une fonction Python qui inverse une liste.", "Explique-moi ce qu'est la photosynthèse.",
    "¿Cuál es la diferencia entre una lista y una tupla en Python?",
    "Escribe un poema corto sobre el mar.", "Erkläre mir, wie ein Computer funktioniert.",
    "Was ist der Unterschied zwischen Wetter und Klima?", "Spiega cos'è la ricorsione in informatica.",
    "Qual é a capital do Canadá?", "请用简单的话解释什么是机器学习。", "写一个计算阶乘的Python函数。",
    "日本の首都はどこですか？", "Переведи на английский: я люблю программировать.",
    "Translate into French: the weather is nice today.", "Translate into Spanish: where is the library?",
    "Translate into German: I would like a cup of coffee.",
]
_REASONING = [
    "If all bloops are razzies and all razzies are lazzies, are all bloops lazzies? Explain.",
    "Alice is taller than Bob, and Bob is taller than Carol. Who is the shortest?",
    "I have 3 apples, eat one, and buy 5 more. How many apples do I have?",
    "A bat and a ball cost $1.10 in total. The bat costs $1 more than the ball. How much is the ball?",
    "Which is heavier, a kilogram of feathers or a kilogram of iron?",
    "If it takes 5 machines 5 minutes to make 5 widgets, how long do 100 machines take for 100 widgets?",
    "What comes next in the sequence 2, 4, 8, 16, ...?",
    "Tom is older than Jane but younger than Sam. Who is the oldest?",
]
_ROLES = [
    "a pirate captain", "a medieval knight", "a detective in 1920s London", "a friendly robot",
    "a wise old wizard", "a travel guide in Rome", "a grumpy chef", "a starship engineer",
]
_WRITING_KINDS = ["a short poem", "a haiku", "a short story", "a persuasive paragraph", "a blog post intro",
                  "a limerick"]
_WRITING_SUBJ = ["autumn", "a lost cat", "the ocean", "a rainy city", "friendship", "a robot learning to paint",
                 "the first day of school", "coffee"]


def instruction_prompts(items: Sequence[DocItem], rng: random.Random, n_doc: int) -> list[tuple[str, str]]:
    """(category, prompt) pairs: template-generated instructions plus docstring-based ones."""
    out: list[tuple[str, str]] = []
    for task in _CODE_TASKS:
        out.append(("coding", f"Write a Python function that {task}."))
        out.append(("coding", f"How would I write code that {task}? Please include an example."))
    for t in _TOPICS:
        out.append(("humanities" if t[0].isupper() or "the " in t else "stem", f"Explain {t} in simple terms."))
        out.append(("qa", f"What are the main ideas behind {t}?"))
        out.append(("writing", f"Write a short essay about {t}."))
        out.append(("stem", f"Give me three facts about {t}."))
    out += [("math", q) for q in _MATH]
    out += [("math", f"Calculate {a} + {b} * {c}.") for a, b, c in [(3, 4, 5), (12, 7, 2), (9, 9, 9), (100, 25, 4)]]
    out += [("qa", q) for q in _QA]
    out += [("multilingual", q) for q in _MULTI]
    out += [("reasoning", q) for q in _REASONING]
    for role in _ROLES:
        out.append(("roleplay", f"Pretend you are {role}. Introduce yourself."))
        out.append(("roleplay", f"You are {role}. Tell me about your day."))
    for kind in _WRITING_KINDS:
        for subj in _WRITING_SUBJ:
            out.append(("writing", f"Write {kind} about {subj}."))
    for it in rng.sample(list(items), min(n_doc, len(items))):
        r = rng.random()
        if r < 0.3:
            out.append(("coding", f"Write a Python function `{it.signature}`: {it.summary}"))
        elif r < 0.5:
            out.append(("summarization", f"Summarize the following text:\n\n{it.docstring[:1200]}"))
        elif r < 0.7:
            out.append(("rag", f"Use the context to answer the question.\n\nContext:\n{it.docstring[:1200]}"
                               f"\n\nQuestion: What does {it.name} do?"))
        elif r < 0.85:
            out.append(("qa", f"What does `{it.module}.{it.name}` do in Python?"))
        else:
            out.append(("coding", f"Explain this code:\n\n```python\n{it.source[:1000]}\n```"))
    return out


_PREFIXES = ["", "", "", "Please help me. ", "Quick question: ", "Hi! ", "I need some help. ", "Hello, "]
_SUFFIXES = ["", "", "", " Be concise.", " Explain your answer.", " Please answer in detail.",
             " Use simple words.", " Give an example.", " Keep it short.", " Think step by step."]


def vary_prompt(prompt: str, rng: random.Random) -> str:
    """Add a random polite prefix and/or instruction suffix, so repeated templates still differ."""
    return f"{rng.choice(_PREFIXES)}{prompt}{rng.choice(_SUFFIXES)}"
