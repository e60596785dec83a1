"""The shipped-recipes reference page, written at build time from recipes/: every recipe `smolalign recipes list`
shows, with its stage, method, `description:` and header comment (what it trains, the hardware, the command).
Build: `make docs`."""

from markdown_text import cell


def page() -> str:
    from smolalign.recipe.load import header_comment, read_recipe, shipped_recipes
    from smolalign.recipe.yamlio import load_yaml

    lines = ["# Shipped recipes", "",
             "Generated from `recipes/` when the site is built: what `smolalign recipes list` lists. Run one by its "
             "name (`smolalign sft quickstart/sft`), copy one to edit with `smolalign recipes cp NAME DEST`. "
             "`recipes/accelerate/` holds the `--launch` presets ([Several processes](../scaling/index.md)).", ""]
    for name, path in shipped_recipes().items():
        raw = read_recipe(path)
        facts = [f"stage `{raw.get('stage', 'sft')}`"]
        if raw.get("method") is not None:
            facts.append(f"method `{raw['method']}`")
        extends = (load_yaml(path.read_text()) or {}).get("extends")
        if extends:
            facts.append(f"extends `{extends}`")
        lines += [f"## `{name}`", "", cell(raw.get("description") or ""), "",
                  f"`recipes/{name}.yaml`: " + ", ".join(facts) + ".", ""]
        header = header_comment(path)
        if header:
            lines += ["```text", *header, "```", ""]
    return "\n".join(lines)
