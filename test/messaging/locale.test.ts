import { expect } from "chai";
import { SUPPORTED_LANGUAGES, isBcp47, resolveLocale } from "../../src/messaging/templates.js";

describe("SMS locale", () => {
  it("supports en, fr, de, es, it and pt", () => {
    expect([...SUPPORTED_LANGUAGES]).to.deep.equal(["en", "fr", "de", "es", "it", "pt"]);
  });

  for (const language of ["en", "fr", "de", "es", "it", "pt"]) {
    it(`keeps a requested ${language} locale, whatever the number's country`, () => {
      expect(resolveLocale(language, "JP")).to.equal(language);
      expect(resolveLocale(`${language}-CH`, "JP")).to.equal(`${language}-CH`);
    });
  }

  const requested: [string, string, string][] = [
    ["fr-ca", "US", "fr-CA"],
    ["FR", "US", "fr"],
    ["pt-br", "PT", "pt-BR"],
    ["de-AT", "FR", "de-AT"],
    ["es-419", "US", "es-419"],
    ["EN-gb", "FR", "en-GB"],
    ["zh-hant-tw", "TW", "en-US"],
    ["nl-NL", "NL", "en-US"],
    ["ja", "FR", "en-US"],
    ["en_US!", "FR", "en-US"],
  ];
  for (const [tag, country, expected] of requested) {
    it(`resolves requested ${tag} for a ${country} number to ${expected}`, () => {
      expect(resolveLocale(tag, country)).to.equal(expected);
    });
  }

  const byCountry: [string, string][] = [
    ["FR", "fr-FR"],
    ["BE", "fr-BE"],
    ["LU", "fr-LU"],
    ["MC", "fr-MC"],
    ["RE", "fr-RE"],
    ["SN", "fr-SN"],
    ["CH", "de-CH"],
    ["DE", "de-DE"],
    ["AT", "de-AT"],
    ["ES", "es-ES"],
    ["MX", "es-MX"],
    ["AR", "es-AR"],
    ["IT", "it-IT"],
    ["SM", "it-SM"],
    ["BR", "pt-BR"],
    ["PT", "pt-PT"],
    ["AO", "pt-AO"],
    ["US", "en-US"],
    ["GB", "en-GB"],
    ["CA", "en-CA"],
    ["JP", "en-US"],
    ["NL", "en-US"],
    ["MA", "en-US"],
    ["ZZ", "en-US"],
  ];
  for (const [country, expected] of byCountry) {
    it(`uses ${expected} for a ${country} number when no locale is requested`, () => {
      expect(resolveLocale(undefined, country)).to.equal(expected);
    });
  }

  it("treats an empty requested locale as unset, and reads the country in any case", () => {
    expect(resolveLocale("", "fr")).to.equal("fr-FR");
  });

  it("recognises well-formed BCP-47 tags and refuses others", () => {
    for (const tag of ["en", "en-US", "fr-CA", "zh-Hant-TW", "es-419", "de-CH-1996"])
      expect(isBcp47(tag), tag).to.equal(true);
    for (const tag of ["", "e", "en_US", "en--US", "123", "en-US!", "a".repeat(36), "toolonglanguage"]) {
      expect(isBcp47(tag), tag).to.equal(false);
    }
  });
});
