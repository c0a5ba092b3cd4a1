import { expect } from "chai";
import { RingfenceError } from "../../src/errors.js";
import {
  customTemplatesSchema,
  fitsOneSms,
  isAppRealm,
  isGsm7,
  renderOtpSms,
  smsEncoding,
  validateTemplateText,
} from "../../src/messaging/templates.js";

const code = "482913";
const render = (locale: string, extra: Partial<Parameters<typeof renderOtpSms>[0]> = {}) =>
  renderOtpSms({ code, locale, lifetimeMinutes: 10, ...extra });

/** The code is in the body as a run of digits of its own. */
const codeRun = new RegExp(`(^|\\D)${code}(\\D|$)`);

function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  return expect.fail("did not throw");
}

describe("OTP message text", () => {
  const defaults: [string, string][] = [
    ["en-US", "Your verification code is 482913. It expires in 10 minutes."],
    ["fr-FR", "Votre code de vérification est 482913. Il expire dans 10 minutes."],
    ["de-DE", "Ihr Bestätigungscode lautet 482913. Er ist 10 Minuten gültig."],
    ["es-ES", "Tu código de verificación es 482913. Expira en 10 minutos."],
    ["it-IT", "Il tuo codice di verifica è 482913. Scade tra 10 minuti."],
    ["pt-BR", "Seu código de verificação é 482913. Ele expira em 10 minutos."],
    ["pt-PT", "O seu código de verificação é 482913. Expira dentro de 10 minutos."],
  ];
  for (const [locale, body] of defaults) {
    it(`renders the default ${locale} text with the code as digits and the lifetime`, () => {
      const sms = render(locale);
      expect(sms).to.deep.equal({ body, locale, templateId: "default" });
      expect(sms.body).to.match(codeRun);
    });
  }

  const shorts: [string, string][] = [
    ["en", "Code: 482913"],
    ["fr", "Code : 482913"],
    ["de", "Code: 482913"],
    ["es", "Código: 482913"],
    ["it", "Codice: 482913"],
    ["pt", "Código: 482913"],
  ];
  for (const [locale, body] of shorts) {
    it(`renders the short ${locale} text with the code as digits`, () => {
      expect(render(locale, { templateId: "short" })).to.deep.equal({ body, locale, templateId: "short" });
    });
  }

  it("says 1 minute, not 1 minutes, in every language", () => {
    const bodies = ["en", "fr", "de", "es", "it", "pt", "pt-PT"].map(
      (l) => render(l, { lifetimeMinutes: 1 }).body,
    );
    expect(bodies).to.deep.equal([
      "Your verification code is 482913. It expires in 1 minute.",
      "Votre code de vérification est 482913. Il expire dans 1 minute.",
      "Ihr Bestätigungscode lautet 482913. Er ist 1 Minute gültig.",
      "Tu código de verificación es 482913. Expira en 1 minuto.",
      "Il tuo codice di verifica è 482913. Scade tra 1 minuto.",
      "Seu código de verificação é 482913. Ele expira em 1 minuto.",
      "O seu código de verificação é 482913. Expira dentro de 1 minuto.",
    ]);
  });

  it("writes European Portuguese for Lusophone countries other than Brazil", () => {
    expect(render("pt-AO").body).to.match(/^O seu código/);
    expect(render("pt").body).to.match(/^Seu código/);
  });

  it("keeps a regional English locale and an unsupported one falls back to en-US text", () => {
    expect(render("en-GB")).to.deep.include({ locale: "en-GB", templateId: "default" });
    expect(render("ja-JP")).to.deep.equal({
      body: "Your verification code is 482913. It expires in 10 minutes.",
      locale: "en-US",
      templateId: "default",
    });
  });

  it("fits every built-in text in one SMS, GSM-7 where the language allows", () => {
    for (const locale of ["en", "fr", "de", "es", "it", "pt", "pt-PT"]) {
      for (const templateId of ["default", "short"])
        expect(fitsOneSms(render(locale, { templateId }).body)).to.equal(true);
    }
    expect(["en", "fr", "de", "it"].map((l) => isGsm7(render(l).body))).to.deep.equal([
      true,
      true,
      true,
      true,
    ]);
  });

  it("refuses an unknown template id with invalid_template_id", () => {
    const err = thrown(() => render("en", { templateId: "promo" }));
    expect(err).to.be.instanceOf(RingfenceError);
    expect(err).to.include({ code: "invalid_template_id", message: 'template_id: unknown template "promo"' });
  });

  describe("custom templates", () => {
    const customTemplates = {
      acme: { en: "{code} is your ACME code.", fr: "{code} est votre code ACME, valable {minutes} min." },
      default: { fr: "ACME : {code}" },
    };

    it("uses the account's text for the language first", () => {
      expect(render("fr-FR", { templateId: "acme", customTemplates })).to.deep.equal({
        body: "482913 est votre code ACME, valable 10 min.",
        locale: "fr-FR",
        templateId: "acme",
      });
    });

    it("falls back to the template's English text, in en-US", () => {
      expect(render("de-DE", { templateId: "acme", customTemplates })).to.deep.equal({
        body: "482913 is your ACME code.",
        locale: "en-US",
        templateId: "acme",
      });
    });

    it("overrides a built-in template only for the languages it gives", () => {
      expect(render("fr-FR", { customTemplates }).body).to.equal("ACME : 482913");
      expect(render("it-IT", { customTemplates }).body).to.equal(
        "Il tuo codice di verifica è 482913. Scade tra 10 minuti.",
      );
    });

    it("falls back to the default template when the custom one has neither the language nor English", () => {
      expect(
        render("it-IT", { templateId: "x", customTemplates: { x: { de: "Code {code}" } } }),
      ).to.deep.equal({
        body: "Il tuo codice di verifica è 482913. Scade tra 10 minuti.",
        locale: "it-IT",
        templateId: "default",
      });
    });

    it("skips a stored text that lacks {code}, so the code is always sent", () => {
      const sms = render("en", { templateId: "x", customTemplates: { x: { en: "Welcome!" } } });
      expect(sms.body).to.match(codeRun);
      expect(sms.templateId).to.equal("default");
    });

    it("validates texts: {code} required, known placeholders only, code kept apart from digits", () => {
      expect(validateTemplateText("{code} is your code")).to.equal(undefined);
      expect(validateTemplateText("Code {code}, {minutes} min")).to.equal(undefined);
      expect(validateTemplateText("Your code")).to.equal("must contain {code}");
      expect(validateTemplateText("")).to.equal("must not be empty");
      expect(validateTemplateText("{code} {name}")).to.equal(
        "unknown placeholder {name}: use {code} or {minutes}",
      );
      expect(validateTemplateText("A1{code}")).to.equal("{code} must not touch other digits");
      expect(validateTemplateText("{code}{minutes}")).to.equal("{code} must not touch other digits");
      expect(validateTemplateText(`{code} ${"x".repeat(460)}`)).to.match(/at most 459/);
    });

    it("checks an account's templates with the schema", () => {
      expect(
        customTemplatesSchema.safeParse({ acme: { en: "{code}", "pt-BR": "Código {code}" } }).success,
      ).to.equal(true);
      const bad = customTemplatesSchema.safeParse({ acme: { en: "no code" } });
      expect(bad.success).to.equal(false);
      expect(bad.error?.issues[0]).to.deep.include({ path: ["acme", "en"], message: "must contain {code}" });
      expect(customTemplatesSchema.safeParse({ acme: { en_US: "{code}" } }).success).to.equal(false);
      expect(customTemplatesSchema.safeParse({ "bad id": { en: "{code}" } }).success).to.equal(false);
    });
  });

  describe("Android SMS Retriever (app_realm)", () => {
    const appRealm = "FA+9qCX9VSu";

    it("starts with <#>, ends with a new line and the 11-character app hash, and keeps the code", () => {
      const sms = render("en-US", { appRealm });
      expect(sms.body).to.equal(
        `<#> Your verification code is 482913. It expires in 10 minutes.\n${appRealm}`,
      );
      expect(sms.body).to.match(codeRun);
      expect(fitsOneSms(sms.body)).to.equal(true);
    });

    it("switches to the short text when the default would pass the Retriever's 140 bytes", () => {
      const sms = render("es-ES", { appRealm });
      expect(sms).to.deep.equal({
        body: `<#> Código: 482913\n${appRealm}`,
        locale: "es-ES",
        templateId: "short",
      });
    });

    it("recognises an app hash: 11 characters of A-Z, a-z, 0-9, + and /", () => {
      for (const v of ["FA+9qCX9VSu", "abcdefghijk", "0123456789/"]) expect(isAppRealm(v), v).to.equal(true);
      for (const v of ["", "FA+9qCX9VS", "FA+9qCX9VSuu", "FA-9qCX9VSu", "FA 9qCX9VSu"])
        expect(isAppRealm(v), v).to.equal(false);
    });

    it("refuses a malformed app realm with bad_request", () => {
      expect(thrown(() => render("en", { appRealm: "short" }))).to.include({ code: "bad_request" });
    });
  });

  it("refuses a code that is not digits", () => {
    expect(() => render("en", { code: "12ab" })).to.throw(/digits/);
  });
});

describe("GSM-7", () => {
  it("holds the GSM 03.38 alphabet and its extension table, and nothing else", () => {
    expect(isGsm7("Hello @£$¥èéùìò Ç ÄÖÑÜ äöñüà ΔΦΓΛΩΠΨΣΘΞ {}[]~|^€\\")).to.equal(true);
    for (const text of ["ç", "ó", "ã", "κωδικός", "🔐", "’"]) expect(isGsm7(text), text).to.equal(false);
  });

  it("counts extension characters as two septets, and UCS2 by UTF-16 units", () => {
    expect(smsEncoding("a€")).to.deep.equal({ encoding: "gsm7", units: 3, singleSmsUnits: 160 });
    expect(smsEncoding("é🔐")).to.deep.equal({ encoding: "ucs2", units: 3, singleSmsUnits: 70 });
  });
});
