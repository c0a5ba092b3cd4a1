import { expect } from "chai";
import { canonicalLocale, localeParts, pluralRules } from "../../src/messaging/intl-cache.js";

describe("Intl worked out once per tag (src/messaging/intl-cache.ts)", () => {
  const tags = ["fr-ca", "FR", "pt-ao", "en-US", "zh-hant-tw", "de-CH-1996", "x", "en_US", "12", "not a tag"];

  it("answers what Intl answers, refusals included", () => {
    for (const tag of tags) {
      let expected: string | undefined;
      try {
        expected = Intl.getCanonicalLocales(tag)[0];
      } catch {
        expected = undefined;
      }
      expect(canonicalLocale(tag), tag).to.equal(expected);
      if (expected === undefined) continue;
      const { language, region } = new Intl.Locale(expected);
      expect(localeParts(expected), tag).to.deep.equal({ language, region });
      for (const n of [0, 1, 2, 10])
        expect(pluralRules(expected).select(n)).to.equal(new Intl.PluralRules(expected).select(n));
    }
  });

  it("builds a locale's plural rules once, and still answers right past its bound of tags", () => {
    expect(pluralRules("fr-FR")).to.equal(pluralRules("fr-FR"));
    // 2,000 tags a caller made up: the cache starts again when full, answers stay right.
    for (let i = 0; i < 2_000; i++) expect(canonicalLocale(`en-x-t${i}`)).to.equal(`en-x-t${i}`);
    expect(canonicalLocale("fr-ca")).to.equal("fr-CA");
    expect(pluralRules("fr-FR").select(1)).to.equal("one");
  });
});
