"""Completions as models write them, each with the gold answer and the verdict a grader should give, reasoned from
the text (the comment or the id says why), never from running the reward: read by tests/unit/test_math_answers.py.

CASES are written for this table; UPSTREAM are open-r1's and Math-Verify's own published cases about reading a
final answer, adapted (shortened where the length did not matter, gold and completion as `math_accuracy` takes them),
each group citing the file it comes from."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Answer:
    id: str
    completion: str
    gold: str
    expected: float | None


A = Answer

DELIMITERS = [
    A("inline-paren-delimiters", r"Answer \( 9 \)", "9", 1.0),
    A("inline-paren-tuple-after-statement", r"The final answer is \((-6, 10)\).", "$(-6, 10)$", 1.0),
    A("display-bracket", "Therefore the area is\n\\[ 12\\sqrt{3} \\]", r"$12\sqrt{3}$", 1.0),
    A("display-dollars-fraction-vs-decimal", r"So the total is $$\frac{7}{2}$$", "3.5", 1.0),
    A("left-right-parens-tuple", r"The answer is $\left( \frac{1}{2}, 3 \right)$.", r"$(\frac12, 3)$", 1.0),
    A("aside-after-inline-paren", r"Thus \(x = \frac{3}{4}\) (after simplifying the fraction).", r"$\frac{3}{4}$", 1.0),
    # "(not \( 8 \))" is a remark: the answer given is 7.
    A("aside-holding-delimiters-is-dropped", r"The answer is \( 7 \) (not \( 8 \)).", "8", 0.0),
    # Inside math, "(x + 1)" is a factor, not a remark.
    A("display-math-product-with-spaces", "So the line is\n\\[ y = 3 (x + 1) \\]", "$y = 3x + 3$", 1.0),
    A("boxed-in-display-bracket", r"\[\boxed{42}\]", "42", 1.0),
    A("tfrac-negative", r"The slope is $-\tfrac{1}{2}$.", "-1/2", 1.0),
    # "$18" is a price, not an opening math delimiter.
    A("price-dollar-sign", "Janet sells 16 - 3 - 4 = 9 eggs and makes 9 * 2 = $18 every day.", "18", 1.0),
    A("dollar-pairs-around-words", r"With $a = 3$ and $b = 4$ the hypotenuse is $c = 5$.", "5", 1.0),
]

TUPLES_INTERVALS_SETS = [
    A("interval-in-dollars", "The solution set is $(1, 2)$.", "$(1, 2)$", 1.0),
    A("half-open-interval", "The domain is $[0, 1)$.", "$[0,1)$", 1.0),
    A("half-open-interval-wrong-side", "The domain is $[0, 1)$.", "$(0,1]$", 0.0),
    A("ordered-pair", "So the ordered pair is $(7, 6)$.", "$(7,6)$", 1.0),
    A("ordered-pair-swapped", "So the ordered pair is $(6, 7)$.", "$(7,6)$", 0.0),
    A("set-of-roots-vs-list-gold", r"The roots are $x = -2$ and $x = 1$, so the solution set is $\{-2, 1\}$.",
      "$-2,1$", 1.0),
    A("union-of-intervals", r"Therefore $x \in (-\infty, -3] \cup [2, \infty)$.", r"$(-\infty,-3]\cup[2,\infty)$",
      1.0),
    # The remark in parentheses goes; the point in $…$ stays.
    A("tuple-then-aside", "The vertex is at $(2, -3)$ (the minimum of the parabola).", "$(2,-3)$", 1.0),
    A("list-after-equals", "So $n = 1, 2, 3$.", "$1, 2, 3$", 1.0),
    A("list-after-equals-wrong", "So $n = 1, 2, 3$.", "$2, 3, 4$", 0.0),
    A("set-missing-an-element", r"The solutions are $\{1, 2\}$.", r"$\{1, 2, 3\}$", 0.0),
]

MULTIPLE_BOXES = [
    A("three-boxes-set-gold", r"\boxed{1}, \boxed{2} and \boxed{3}", r"$\{1,2,3\}$", 1.0),
    A("three-boxes-gold-has-two", r"\boxed{1}, \boxed{2} and \boxed{3}", "$1, 2$", 0.0),  # 3 is extra
    A("boxes-in-two-cases", "Case 1: $x = \\boxed{2}$.\n\nCase 2: $x = \\boxed{-5}$.", "$2, -5$", 1.0),
    # One value asked for, two given: the last box (-5) is the answer, and it is wrong.
    A("boxes-in-two-cases-scalar-gold", "Case 1: $x = \\boxed{2}$.\n\nCase 2: $x = \\boxed{-5}$.", "2", 0.0),
    A("intermediate-box-then-final-box",
      r"The second CD earns $\boxed{255}$, but the question asks for the total, which is $\boxed{10455}$.",
      "10455", 1.0),
    A("intermediate-box-is-not-the-answer",
      r"The second CD earns $\boxed{255}$, but the question asks for the total, which is $\boxed{10455}$.",
      "255", 0.0),
    A("two-boxes-any-order", r"The integers are \boxed{-2} and \boxed{1}.", "$1,-2$", 1.0),
    A("two-boxes-gold-has-three", r"The integers are \boxed{-2} and \boxed{1}.", "$-2, 1, 3$", 0.0),
    A("adjacent-boxes", r"$\boxed{1}\boxed{2}$", r"$\{1, 2\}$", 1.0),
    A("one-box-holding-a-list", r"The solutions are $\boxed{1, -2}$.", r"$\{-2, 1\}$", 1.0),
    # The first box was a slip; the statement announces the two final boxes, which form the set.
    A("boxes-after-the-statement-form-the-set",
      "First I get $\\boxed{3}$. But $(-3)^2 = 9$ too.\n\nThe answers are $\\boxed{3}$ and $\\boxed{-3}$.",
      r"$\pm 3$", 1.0),
    A("corrected-box-wins", "\\boxed{4}\n\nWait, that was the radius; the diameter is \\boxed{8}.", "8", 1.0),
    A("corrected-box-wins-old-value-loses", "\\boxed{4}\n\nWait, that was the radius; the diameter is \\boxed{8}.",
      "4", 0.0),
]

RELATIONS = [
    A("ascii-le", "Thus $x <= 2$ is our answer.", r"$x \le 2$", 1.0),
    A("geq-vs-ascii", r"Therefore $x \geq 5$ is the solution.", "$x >= 5$", 1.0),
    A("neq", r"We find that $x \neq 3$.", r"$x \ne 3$", 1.0),
    A("wrong-direction", "The answer is $x < 5$.", "$x > 5$", 0.0),
    A("relation-then-aside-with-math", r"So the inequality holds for $x \le 2$ (checking $x = 3$ gives $9 > 8$).",
      r"$x \le 2$", 1.0),
    A("flipped-relation", r"The solution is $5 \geq x$.", r"$x \le 5$", 1.0),
    A("relation-is-not-its-bound", r"Thus $x \le 2$.", "2", 0.0),  # a condition on x is not the number 2
    A("relation-after-final-answer", r"Final answer: $k \geq 3$.", r"$k \ge 3$", 1.0),
    A("strict-vs-non-strict", r"Final answer: $k \geq 3$.", "$k > 3$", 0.0),
]

EQUATIONS = [
    A("line-equation", "So the line is $y = 2x + 3$.", "$y = 2x + 3$", 1.0),
    A("plane-equation", "The equation of the plane is $x - 2y + z - 1 = 0$.", "$x-2y+z-1=0$", 1.0),
    A("equivalent-equation", "The equation is $2x + 4y - 3 = 0$.", r"$y=-\frac{1}{2}x+\frac{3}{4}$", 1.0),
    A("different-intercept", "The answer is $y = 2x + 5$.", "$y = 2x + 3$", 0.0),
    A("value-given-as-equation", "$x = 11$", "11", 1.0),
    A("sum-with-subscripts", r"So $F_n = \sum_{k=0}^{n-1} F_k F_{n-k-1}$.", r"$F_n = \sum_{k=0}^{n-1} F_k F_{n-k-1}$",
      1.0),
    A("sum-with-wrong-bounds", r"So $F_n = \sum_{k=0}^{n-2} F_k F_{n-k-2}$.",
      r"$F_n = \sum_{k=0}^{n-1} F_k F_{n-k-1}$", 0.0),
    A("chain-ends-in-value", "$x = 5+5+1 = 11$", "$x = 11$", 1.0),
    A("closed-form-as-equation", r"Summing, $\sum_{k=1}^{n} k = \frac{n(n+1)}{2}$.", r"$\frac{n(n+1)}{2}$", 1.0),
]

FINAL_AFTER_WORKING = [
    A("boxed-working-then-final-statement",
      r"Interest on the first CD: $0.04 \cdot 10{,}000 \cdot \frac12 = \boxed{200}$. On the second: "
      r"$0.05 \cdot 10{,}200 \cdot \frac12 = \boxed{255}$. So he has $10{,}200 + 255 = 10{,}455$. "
      "Final Answer: The final answer is $10,455$. I hope it is correct.", "10455", 1.0),
    A("boxed-working-is-not-the-answer",
      r"Interest on the first CD: $0.04 \cdot 10{,}000 \cdot \frac12 = \boxed{200}$. On the second: "
      r"$0.05 \cdot 10{,}200 \cdot \frac12 = \boxed{255}$. So he has $10{,}200 + 255 = 10{,}455$. "
      "Final Answer: The final answer is $10,455$. I hope it is correct.", "255", 0.0),
    A("answer-is-after-a-box", "Each box holds $\\boxed{12}$ pens.\nThe answer is 36.", "36", 1.0),
    A("check-after-the-answer", "The answer is 36.\n\nCheck: 3 boxes × 12 pens = 36, and 36 - 1 = 35 after one is used.",
      "36", 1.0),
    A("check-after-the-answer-not-read", "The answer is 36.\n\nCheck: 3 boxes × 12 pens = 36, and 36 - 1 = 35 after "
      "one is used.", "35", 0.0),
    # math-verify alone reads an "answer" anchor on to the last "=" of its line: here 35 and 24.
    A("check-on-the-same-line", "The answer is 36. Check: 3 × 12 = 36, and 36 - 1 = 35 remain after one is used.",
      "35", 0.0),
    A("answer-colon-then-working", "Answer: 12. Since 3 × 4 = 12 and 12 × 2 = 24 for both groups.", "24", 0.0),
    A("restated-answer-wins", "The answer is 5. Wait, let me recheck: 2 + 4 = 6. So the answer is 6.", "6", 1.0),
    A("markdown-answer-then-explanation", "**Answer:** 12\n\nExplanation: 3 × 4 = 12, and two groups make 24.", "12",
      1.0),
    A("markdown-answer-explanation-not-read", "**Answer:** 12\n\nExplanation: 3 × 4 = 12, and two groups make 24.",
      "24", 0.0),
    A("fraction-restated-as-decimal", r"So the final answer is $\frac{3}{4}$, which is $0.75$ as a decimal.", "3/4",
      1.0),
    A("verification-after-answer", "The answer is $x = 4$.\n\nVerification: $4^2 = 16$.", "4", 1.0),
    A("answer-then-recap", "The answer to the question is 15 apples.\nShe started with 20 and gave away 5.", "15", 1.0),
    A("final-statement-corrects-a-box", "\\boxed{20}\n\nThe final answer is 25, since I forgot the 5 extra.", "25",
      1.0),
    A("statement-and-box-agree", r"The answer is 42. \boxed{42}", "42", 1.0),
    A("statement-holding-a-box", r"Therefore, the final answer is: $\boxed{3}$. I hope it is correct.", "3", 1.0),
    A("statement-pointing-below", "The answer is as follows:\n\n$$x = 42$$", "42", 1.0),
    A("final-answer-colon-then-sentence", "Final Answer: The largest $n$ is 34.", "34", 1.0),
    # "answer" in a sentence that states no answer is not a statement: the box or the last expression before it stays
    # the answer (each of these read the sentence's words or its check, and scored 0, under a looser statement rule).
    A("box-then-answer-makes-sense", "So the total is $\\boxed{42}$.\n\nThis answer makes sense because each of the 6 "
      "boxes is full with 7.", "42", 1.0),
    A("box-then-hope-the-answer-is-helpful", "The final answer is $\\boxed{5}$.\n\nI hope the answer is helpful!", "5",
      1.0),
    A("box-then-check-that-the-answer-is-correct", "So $x = \\boxed{5}$. We can check that the answer is correct: "
      "$2 \\cdot 5 + 3 = 13$.", "5", 1.0),
    A("box-then-our-answer-is-right", "$x = \\boxed{3}$\n\nTo check that our answer is right, substitute: "
      "$2(3) + 1 = 7$.", "3", 1.0),
    A("box-then-counterfactual-answer", "Thus, there are $\\boxed{12}$ ways.\n\nNote that the answer would be 24 if "
      "order mattered.", "12", 1.0),
    A("box-then-counterfactual-not-read", "Thus, there are $\\boxed{12}$ ways.\n\nNote that the answer would be 24 "
      "if order mattered.", "24", 0.0),
    A("to-answer-this-is-not-a-statement", "To answer this, we first find the cost, which is 3 dollars per pound. "
      "Then 4 × 3 = 12.", "12", 1.0),
    A("answer-is-between-is-not-a-statement", "The answer is between 10 and 20. Trying 15 gives 225, so n = 15.",
      "15", 1.0),
    A("answer-is-a-word-then-number", "The answer is a bit tricky: it is 7.", "7", 1.0),
]

ASIDES = [
    A("justification-ends-with-gold", "The answer is 5 (since 2 + 2 = 4)", "4", 0.0),
    A("justification-ends-with-gold-right-answer", "The answer is 5 (since 2 + 2 = 4)", "5", 1.0),
    A("working-in-parentheses", "The sum is 42. (12 + 30)", "42", 1.0),
    A("remark-with-numbers", "It is 42 (I added 12 and 30).", "42", 1.0),
    A("remark-with-a-product", "There are 8 ways (choosing 3 of 4 gives 4, times 2).", "8", 1.0),
    A("remark-with-units", "The perimeter is 24 cm (each side is 6 cm).", "24", 1.0),
    A("remark-after-fraction", r"The probability is $\frac{1}{6}$ (one favourable outcome out of 6).", "1/6", 1.0),
    A("remark-holding-a-formula", "So $f(3) = 10$ (using $f(x) = 3x + 1$).", "10", 1.0),
    A("remark-naming-the-wrong-answer", "The answer is 12 (not 13, which counts the corner twice).", "13", 0.0),
    A("remark-naming-the-wrong-answer-right", "The answer is 12 (not 13, which counts the corner twice).", "12", 1.0),
    A("modulus-remark", "The remainder is 4 (mod 7).", "4", 1.0),
    A("units-remark", "The area is 50 (square units).", "50", 1.0),
    A("remark-inside-the-statement", "Hence the answer (after cancelling) is 9.", "9", 1.0),
    A("a-call-is-not-a-remark", "The value of f(2 + 1) is 7.", "7", 1.0),
    A("a-product-is-not-a-remark", "The answer is $(x + 1)(x - 1)$.", "$x^2 - 1$", 1.0),
]

THINK = [
    A("think-then-statement", "<think>\nLet me compute 17 × 3 = 51. Hmm, 51 + 4 = 55.\n</think>\nThe answer is 55.",
      "55", 1.0),
    A("think-value-not-read", "<think>\nI think it's 12.\n</think>\n\nThe total is $\\boxed{14}$.", "12", 0.0),
    A("box-in-think-not-read", "<think>\nSo it is \\boxed{7}.\n</think>\nSo the answer is 8.", "7", 0.0),
    A("think-then-bare-number", "<think>\nworking: 2 + 2 = 4\n</think>\n\n4", "4", 1.0),
    A("empty-think-no-think-mode", "<think>\n\n</think>\n\nThe answer is $\\frac{1}{2}$.", "0.5", 1.0),
    A("think-never-closed", "<think>\nlong reasoning: 3 × 7 = 21, and so", "21", 0.0),
    A("nothing-after-think", "<think>\nThe answer is 6.\n</think>\n", "6", 0.0),
    A("no-think-bare-number", "9", "9", 1.0),
    A("prefilled-think-open-tag", "Okay, so the total is 3 + 4 = 7.\n</think>\n\nThe answer is $\\boxed{7}$.", "7",
      1.0),
    A("think-then-final-answer-display", "<think>\nCompute: 6 × 7 = 42.\n</think>\n**Final Answer**\n\\[\n\\boxed{42}\n\\]",
      "42", 1.0),
    A("think-with-aside-in-answer", "<think>\n9 - 4 = 5\n</think>\nThe answer is 5 (since 9 - 4 = 5 and 5 + 0 = 5).",
      "5", 1.0),
]

PLAIN_AND_LATEX = [
    A("gsm8k-style-hashes", "Natalia sold 48/2 = 24 clips in May.\nNatalia sold 48+24 = 72 clips altogether in April "
      "and May.\n#### 72", "72", 1.0),
    # The last equation is working; the sentence after it states the result.
    A("result-after-last-equation", "She has 6 × 7 = 42 apples. After eating 2, she has 40 left.", "40", 1.0),
    A("thousands-separators", "The answer is 1,000,000.", "1000000", 1.0),
    A("decimal-vs-fraction", "The answer is 0.5.", "1/2", 1.0),
    A("product-sentence", "He runs 3 sprints 3 times a week, 60 meters each: 3 * 3 * 60 = 540 meters a week.", "540",
      1.0),
    A("percent", "The answer is 25%.", r"$25\%$", 1.0),
    A("negative-after-colon", "Answer: -3", "-3", 1.0),
    A("unparseable-gold-unscored", "The answer is 7.", "a moose?", None),
    A("sqrt-simplified", r"We have $\sqrt{117} = 3\sqrt{13}$.", r"$3\sqrt{13}$", 1.0),
    A("boxed-expression", r"Thus $x-p=\boxed{2-2p}$.", "$2-2p$", 1.0),
    A("boxed-text", r"Therefore, $\boxed{\text{Evelyn}}$ is our answer.", r"$\text{Evelyn}$", 1.0),
    A("boxed-with-unit", r"The distance is $\boxed{125\textnormal{ miles}}.$", "125", 1.0),
    A("boxed-plus-minus", r"By the quadratic formula, $x = \boxed{1 \pm \sqrt{19}}$.", r"$1 \pm \sqrt{19}$", 1.0),
    A("matrix-one-entry-off", r"The matrix is $\begin{pmatrix} 1 & 2 \\ 3 & 5 \end{pmatrix}$.",
      r"$\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}$", 0.0),
    A("wrong-number", "It is 41.", "42", 0.0),
]

CASES = (DELIMITERS + TUPLES_INTERVALS_SETS + MULTIPLE_BOXES + RELATIONS + EQUATIONS + FINAL_AFTER_WORKING + ASIDES
         + THINK + PLAIN_AND_LATEX)

# open-r1, tests/test_rewards.py (github.com/huggingface/open-r1): accuracy_reward's cases; an unparseable gold is
# skipped (None), as open-r1's reward does.
OPEN_R1 = [
    A("open-r1-boxed-fraction", r"\boxed{\frac{63}{400}}", r"\frac{63}{400}", 1.0),
    A("open-r1-boxed-fraction-wrong", r"\boxed{\frac{64}{400}}", r"\frac{63}{400}", 0.0),
    A("open-r1-unparseable-solution", r"\boxed{answer}", "unparseable_latex", None),
]

# Math-Verify, tests/test_all.py (github.com/huggingface/Math-Verify): test_latex_notation, test_relations_math,
# test_latex_notation_math, test_math_extraction_edge_cases and test_math_extraction_additional_cases, the cases about
# where the final answer is (long model outputs shortened where the cut part holds no answer).
MATH_VERIFY = [
    A("mv-answer-display-bracket", r"Answer \[ 9 \]", "$9$", 1.0),
    A("mv-answer-inline-dollars-spaced", "Answer $ 9 $", "$9$", 1.0),
    A("mv-answer-display-dollars", "Answer $$ 9 $$", "$9$", 1.0),
    A("mv-answer-inline-parens", r"Answer \( 9 \)", "$9$", 1.0),
    A("mv-parens-inside-delimiters", r"Answer \( (9+1) \)", "$10$", 1.0),
    A("mv-display-bracket-multiline", "Answer \\[ \n 9 \n \\]", "$9$", 1.0),
    A("mv-escaped-dollar-inside", r"Answer $ \frac{1}{2} \$ = \frac{10}{9} $", "$10/9$", 1.0),
    A("mv-left-right-styling", r"$\left( \frac{1}{3} \right)$", "$1/3$", 1.0),
    A("mv-last-equals", r"$k = \frac{1}{3}$", "$1/3$", 1.0),
    A("mv-unit-text", r"$\frac{1}{3} \text{meters}$", "$1/3$", 1.0),
    A("mv-geq-solution", r"Therefore $x \geq 5$ is the solution.", "$x >= 5$", 1.0),
    A("mv-lt", r"We find that $x \lt 3$.", "$x < 3$", 1.0),
    A("mv-le-ascii", "Thus $x <= 2$ is our answer.", r"$x \leq 2$", 1.0),
    A("mv-neq", r"We find that $x \neq 3$.", "$x != 3$", 1.0),
    A("mv-wrong-relation", "Therefore $x < 5$ is the solution.", "$x > 5$", 0.0),
    A("mv-wrong-relation-le", r"The solution is $x \leq 5$", r"$x \geq 5$", 0.0),
    A("mv-neq-ascii", "The solution is $x != 5$", r"$x \neq 5$", 1.0),
    A("mv-equation-chain", "$x = 5+5+1 = 7 =11$", "$x = 11$", 1.0),
    A("mv-side-is-not-equation", "$11a+c$", "$7 = 11a+c$", 0.0),
    A("mv-approx", r"$x\approx11$", "$11$", 1.0),
    A("mv-equation-rearranged", r"$y=-\frac{1}{2}x+\frac{3}{4}$", "$2x+4y-3=0$", 1.0),
    A("mv-boxed-after-working", "Since $x<2$, it follows that $|x-2|=2-x$. If $2-x=p$, then $x=2-p$. Thus "
      r"$x-p=\boxed{2-2p}$.", "$2-2p$", 1.0),
    A("mv-boxed-name", "Evelyn covered more distance in less time than Briana, so her average speed is greater. "
      r"Therefore, $\boxed{\text{Evelyn}}$ is our answer.", r"$\text{Evelyn}$", 1.0),
    A("mv-boxed-in-align", r"Therefore, \begin{align*} \angle BAC &= \angle BAD + \angle DAC \\ &= 50^\circ+40^\circ"
      r" \\ &= \boxed{90^\circ}. \end{align*}", r"$90^\circ$", 1.0),
    A("mv-boxed-sqrt-in-align", r"We use the distance formula: \begin{align*} \sqrt{(2 - (-4))^2 + ((-6) - 3)^2} &= "
      r"\sqrt{36 + 81}\\ & = \sqrt{117} = \boxed{3\sqrt{13}}. \end{align*}", r"$3\sqrt{13}$", 1.0),
    A("mv-boxed-count", "Of the two-digit perfect squares, only $4^2=16$ and $6^2=36$ end in $6$. Thus, there are "
      r"$\boxed{2}$ distinct possible values for $B$.", "$2$", 1.0),
    A("mv-boxed-list", "Checking, we find that the only integer roots are $\\boxed{-2,1}.$", "$-2,1$", 1.0),
    A("mv-boxed-triple", r"Then solving the system of equations, we find $(p,q,r) = \boxed{(6,31,-1)}.$",
      "$(6,31,-1)$", 1.0),
    A("mv-boxed-plus-minus", r"By the quadratic formula, $x = \boxed{1 \pm \sqrt{19}}.$", r"$1 \pm \sqrt{19}$", 1.0),
    A("mv-boxed-set", r"The roots of $P(x)$ are $-2$ and $1 \pm \sqrt{5}$, so the answer is "
      r"$\boxed{\{1\pm\sqrt{5},-2\}}.$", r"$\{1\pm\sqrt{5},-2\}$", 1.0),
    A("mv-boxed-chain-of-relations", r"Thus, $f(x)$ is an increasing function of $|x - 2|.$ Hence, "
      r"$\boxed{f(2) < f(1) < f(4)}.$", "$f(2) < f(1) < f(4)$", 1.0),
    A("mv-boxed-in-display-equation", "By sum-to-product,\n\\[\\sin (a + b) - \\sin (a - b) = \\boxed{2 \\sin b "
      "\\cos a}.\\]", r"$2 \sin b \cos a$", 1.0),
    A("mv-boxed-with-unit", r"The distance is $\boxed{125\textnormal{ miles}}.$", "$125$ miles", 1.0),
    A("mv-boxed-union", r"The solution set is $\boxed{[-1, -\tfrac12) \cup (-\tfrac12, 0) \cup (0, 1) \cup (1, \infty)}.$",
      r"$[-1, -\frac{1}{2}) \cup (-\frac{1}{2}, 0) \cup (0, 1) \cup (1, \infty)$", 1.0),
    A("mv-answer-is-boxed-sqrt", r"The answer is $\boxed{\sqrt 2+\sqrt 5}$", r"$\sqrt{2}+\sqrt{5}$", 1.0),
    A("mv-malformed-fraction", r"Therefore $\boxed{\frac94\pi}$.", r"$\frac{9}{4}\pi$", 1.0),
    A("mv-probability-in-prose", "P(A) - (1/4) * P(A) = 1/2 (3/4) * P(A) = 1/2 P(A) = (1/2) / (3/4) P(A) = 2/3 "
      "Therefore, the probability that Alice wins the game is 2/3. <|im_start|>user", "$2/3$", 1.0),
    A("mv-count-in-prose", "For each divisor $n$, there corresponds a unique common difference $d = \\frac{90}{n}$. "
      "Therefore, there are 12 distinct arithmetic sequences that meet the three given conditions. I hope it is "
      "correct. <|im_start|>user", "$12$", 1.0),
    A("mv-ordered-pair-repeated", "$y = 8.8 - 2.8 = 6$ So, the ordered pair $(x, y)$ that solves the system is "
      "$(7, 6)$. I apologize for the mistake in the previous response. $y = 8.8 - 2.8 = 6$ So, the ordered pair "
      "$(x, y)$ that solves the system is $(7, 6)$. <|im_start|>user", "$(7,6)$", 1.0),
    A("mv-wrong-interval-stated", "Combining these conditions, the domain of $q(x)$ is the interval $(0, 1)$. Final "
      "Answer: The final answer is $(0, 1)$. I hope it is correct. <|im_start|>user", "$[0,1)$", 0.0),
    # The second, corrected attempt ends with a wrong union; its statement is the last one.
    A("mv-second-attempt-wrong", r"The domain is the interval between the roots, which is $\boxed{[-3, 2]}$. Final "
      "Answer: The final answer is $[-3, 2]$. I hope it is correct. I apologize for the mistake in the previous "
      r"solution. Let me correct it. The domain is the interval outside the roots, which is "
      r"$\boxed{(-\infty, -3] \cup [2, \infty)}$. Final Answer: The final answer is $(-\infty, -3] \cup [2, \infty)$."
      " I hope it is correct. <|im_start|>user", "$[-3,2]$", 0.0),
    A("mv-boxed-money-then-answer-is", r"\[A \approx 16386.20\] Rounded to the nearest cent, Paula's investment is "
      r"worth $\boxed{\$16,\!386.20}$ at the end of the 5-year period. The answer is $16,\!386.20$. I apologize for "
      r"the repetition in my previous responses. Here is the correct solution: To find the value of her investment "
      r"after 5 years, we can use the formula for compound interest: \[A = P \left(1 + \frac{r}{n}\right)^{nt}\]",
      "$16386.20$", 1.0),
    A("mv-final-answer-sentence", r"Therefore, the volume of rectangular prism $ABCDEFGH$ is $5 \times 6 \times 4 = "
      "120$. Final Answer: The volume of $ABCDEFGH$ is 120. I hope it is correct.", "$120$", 1.0),
    A("mv-final-answer-thousands", r"$85 + (-67) + 12,\!000,\!003 + (-3) = 12,\!000,\!023$. Final Answer: The "
      "final answer is 12,000,023. I hope it is correct. <|im_start|>user", "12000023", 1.0),
    A("mv-final-answer-boxed-after-wrong-working", r"Therefore, the smallest possible value for $N$ is $14{,}922$. "
      r"Final Answer: The smallest possible value of $N$ is $\boxed{14{,}916}$. I hope it is correct. "
      "<|im_start|>user", "$14916$", 1.0),
    A("mv-final-answer-pair", r"Thus, $(p,q) = \boxed{\left( \frac{1}{5}, \frac{1}{6} \right)}.$ Final Answer: The "
      r"final answer is $\left( \frac{1}{5}, \frac{1}{6} \right)$. I hope it is correct. <|im_start|>user",
      r"$\left(\frac{1}{5},\frac{1}{6}\right)$", 1.0),
    A("mv-boxed-money-cents", r"\[A \approx 10000(1.025)^{20} \approx 16386.169.\] Rounded to the nearest cent, "
      r"Paula's investment is worth $\boxed{\$16386.17}$ after 5 years. I hope it is correct. <|im_start|>user",
      "$16386.17$", 1.0),
    A("mv-boxed-percent", r"$$\frac{\frac{A }{4 }}{\frac{5A }{4 }}=\frac{1 }{5 }=\boxed{20 \%}. $$ Final Answer: "
      "The final answer is $20 \\%$. I hope it is correct. Note: The solution provided assumes that the total "
      "number of people is the sum of adults and children.", r"$20\%$", 1.0),
    A("mv-final-answer-words", "So, Jane started growing Sphere 3 hours ago. Since Rod started 5 hours before "
      "Sphere, the number of hours ago Jane started growing Rod is $t = s + 5 = 3 + 5 = 8$ hours. Final Answer: "
      "Jane started growing Sphere 3 hours ago. I hope it is correct. <|im_start|>user", "$3$", 1.0),
    A("mv-final-answer-domain-count", r"So, the total number of points in the domain is $1 + 2 \times 9 = 1 + 18 = 19$"
      r" points. Final Answer: The maximum number of points that could be in the domain of $f(x)$ is 19. "
      "<|im_start|>user", "$19$", 1.0),
    A("mv-wrong-point", r"Therefore, the point where the line intersects $\overline{CD}$ is $\boxed{(0, 0)}$. Final "
      "Answer: The final answer is $(0, 0)$. I hope it is correct. <|im_start|>user",
      r"$(\tfrac{27}{8},\tfrac{15}{8})$", 0.0),
    A("mv-final-answer-largest-n", "Final Answer: The largest $n$ is 34.", "$34$", 1.0),
    A("mv-therefore-percent", r"Dividing the second equation by the first equation, we get: $$\frac{\Delta x'}"
      r"{\Delta x} \geq \frac{2}{1}.$$ Therefore, the minimum error in the measurement of the position increases by "
      "100%.", "$100%$", 1.0),
    A("mv-boxed-then-final-answer", r"\[ A \approx 16386.16 \] So, Paula's investment is worth approximately "
      r"$\boxed{16386.16}$ dollars at the end of the 5 years. Final Answer: The final answer is 16386.16.",
      "$16386.16$", 1.0),
    A("mv-boxed-large-number", r"\[ \text{Total sum} = 5866608 \] So, the sum of the integers on Camy's list is "
      r"$\boxed{5866608}$. Final Answer: The final answer is 5866608. I hope it is correct.", "$5866608$", 1.0),
    A("mv-boxed-product", r"So, the total number of distinguishable ways is $1 \times 5! \times 5! = 120 \times 120 "
      r"= \boxed{14400}$. Final Answer: The final answer is 14400. I hope it is correct.", "$14400$", 1.0),
    A("mv-final-answer-after-wrong-working", "Thus, the smallest possible value of $N$ is $14{,}940$. Final Answer: "
      "The final answer is $14{,}916$. I hope it is correct.", "$14916$", 1.0),
    A("mv-approx-money-final-answer", r"$\frac{70}{9} \approx 7.78$ So, Anna pays approximately $7.78 for her "
      "fudge. Final Answer: The final answer is 7.78.", "$7.78$", 1.0),
    A("mv-boxed-equation-and-final-answer", r"The equation of the plane containing $L$ and the point $(1,1,1)$ is then"
      r" $$-1(x-1)+2(y-1)+1(z-1)=0\Rightarrow\boxed{x-2y+z-1=0}.$$ Final Answer: The final answer is $x-2y+z-1=0$."
      " I hope it is correct.", "$x-2y+z-1=0$", 1.0),
    A("mv-intermediate-boxes-then-final-answer", r"The interest earned is $0.04 \cdot 10,000 \cdot \frac{1}{2} = "
      r"\boxed{200}$ So, after six months, Dr. Zaius has $10,000 + $200 = $10,200. The interest earned is "
      r"$0.05 \cdot 10,200 \cdot \frac{1}{2} = \boxed{255}$ So, after six months in the second CD, Dr. Zaius has "
      "$10,200 + $255 = $10,455. Final Answer: The final answer is $10,455$. I hope it is correct.", "$10455$", 1.0),
    A("mv-boxed-interval-display", r"Thus, the values of \( k \) for which the quadratic has real roots are: \[ "
      r"\boxed{[-4, 0]} \]", r"$[-4,0]$", 1.0),
    A("mv-final-answer-inline-parens-interval", r"The solution to the inequality is \( x \in (-6, 10) \). Final "
      r"Answer: The final answer is \((-6, 10)\). I hope it is correct.", r"Therefore, $(A, B) = \boxed{(-6, 10)}.$",
      1.0),
    A("mv-wrong-base-three", r"\[ 1121_{10} = 1112122_3 \] Thus, the product \( ab \) expressed in the base-three "
      r"number system is \(\boxed{1112122_3}\).", r"$1112112_3$", 0.0),
    A("mv-boxed-choice", r"$\boxed{\text{(C)}}.$", r"\(\boxed{\text{C}}\).", 1.0),
    A("mv-boxed-thousands", r"is $\boxed{11,\! 111,\! 111,\! 100}$", r" So the answer is: \[ \boxed{11111111100} \]",
      1.0),
    A("mv-boxed-comma-space-is-a-list", r"is $\boxed{32, 349}$", r" So the answer is: \[ \boxed{32349} \]", 0.0),
    A("mv-answer-is-union", r"Thus, the answer is $x \in \boxed{(2,12) \cup (12,102)}$",
      r"Thus, the domain of the function \( f(x) \) is: \[ \boxed{(2, 12) \cup (12, 102)} \]", 1.0),
    A("mv-one-box-vs-two-boxes", r"$\boxed{1,2}$", r"$\boxed{1}\boxed{2}$", 1.0),
    A("mv-think-then-two-boxes", "<think> Okay, so I have this functional equation to solve. Setting $x = y = 0$ "
      "gives \\( f(0) = -1 \\). **Final Answer** The integers are \\boxed{-2} and \\boxed{1}. </think> Solving "
      "this quadratic equation, we find the roots: \\[ n = 1 \\quad \\text{and} \\quad n = -2. \\] Thus, the "
      "integers \\( n \\) such that \\( f(n) = n \\) are: \\[ \\boxed{-2} \\quad \\text{and} \\quad \\boxed{1}. \\]",
      r"This factors as $(n - 1)(n + 2) = 0,$ so the solutions are $n = \boxed{1,-2}.$", 1.0),
]

# Math-Verify, tests/test_yujianll.py: answers given as lists, equations with sums, and "±".
MATH_VERIFY_LISTS = [
    A("mv-list-equation", "$n=1, 2, 3$", "$n=1, 2, 3$", 1.0),
    A("mv-list-equation-wrong", "$n=1, 2, 3$", "$n=2, 3, 4$", 0.0),
    A("mv-named-interval", "$D = (0, 1)$", "$D = (0, 1)$", 1.0),
    A("mv-named-interval-wrong", "$D = (0, 1.5)$", "$D = (0, 1)$", 0.0),
    A("mv-sum-wrong-bounds", r"$F_n = \sum_{k=0}^{n-2} F_k F_{n-k-2}$", r"$F_n = \sum_{k=0}^{n-1} F_k F_{n-k-1}$",
      0.0),
    A("mv-sum-commuted", r"$F_n = \sum_{k=0}^{n-1} F_{n-k-1} F_k$", r"$F_n = \sum_{k=0}^{n-1} F_k F_{n-k-1}$", 1.0),
    A("mv-list-with-and", r"$19, 46, \text{ and } 82$", "$19, 46, and 82$", 1.0),
    A("mv-list-with-and-wrong", "$21, 36, and 82$", "$19, 46, and 82$", 0.0),
    A("mv-plus-minus-needs-both", "$2021$", r"$\pm 2021$", 0.0),
    A("mv-plus-minus-as-set", "${-2021, 2021}$", r"$\pm 2021$", 1.0),
]

UPSTREAM = OPEN_R1 + MATH_VERIFY + MATH_VERIFY_LISTS
