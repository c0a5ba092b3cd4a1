import { z } from "zod";
import { badField, quote, RingfenceError } from "../errors.js";
import { fitsOneSms } from "./gsm7.js";
import { FALLBACK_LOCALE, isBcp47, languageOf } from "./locale.js";
import { canonicalLocale, localeParts, pluralRules } from "./intl-cache.js";

export { isGsm7, fitsOneSms, smsEncoding } from "./gsm7.js";
export { SUPPORTED_LANGUAGES, isBcp47, resolveLocale } from "./locale.js";

/** A text whose unit agrees with the lifetime (`1 minute`, `10 minutes`), chosen by Intl.PluralRules. */
interface PluralText {
  one: string;
  other: string;
}
type BuiltInText = string | PluralText;

/**
 * Built-in OTP texts by template id, then by language (or language-region where a region writes
 * differently). Placeholders: `{code}` and `{minutes}`. Every template has an `en` text.
 */
const BUILT_IN: Readonly<Record<string, Readonly<Record<string, BuiltInText>>>> = {
  default: {
    en: {
      one: "Your verification code is {code}. It expires in {minutes} minute.",
      other: "Your verification code is {code}. It expires in {minutes} minutes.",
    },
    fr: {
      one: "Votre code de vérification est {code}. Il expire dans {minutes} minute.",
      other: "Votre code de vérification est {code}. Il expire dans {minutes} minutes.",
    },
    de: {
      one: "Ihr Bestätigungscode lautet {code}. Er ist {minutes} Minute gültig.",
      other: "Ihr Bestätigungscode lautet {code}. Er ist {minutes} Minuten gültig.",
    },
    es: {
      one: "Tu código de verificación es {code}. Expira en {minutes} minuto.",
      other: "Tu código de verificación es {code}. Expira en {minutes} minutos.",
    },
    it: {
      one: "Il tuo codice di verifica è {code}. Scade tra {minutes} minuto.",
      other: "Il tuo codice di verifica è {code}. Scade tra {minutes} minuti.",
    },
    // Brazilian by default; European Portuguese for Portugal and the other Lusophone countries.
    pt: {
      one: "Seu código de verificação é {code}. Ele expira em {minutes} minuto.",
      other: "Seu código de verificação é {code}. Ele expira em {minutes} minutos.",
    },
    "pt-PT": {
      one: "O seu código de verificação é {code}. Expira dentro de {minutes} minuto.",
      other: "O seu código de verificação é {code}. Expira dentro de {minutes} minutos.",
    },
  },
  short: {
    en: "Code: {code}",
    fr: "Code : {code}",
    de: "Code: {code}",
    es: "Código: {code}",
    it: "Codice: {code}",
    pt: "Código: {code}",
  },
};

export const DEFAULT_TEMPLATE_ID = "default";
/** Longest custom text: three concatenated GSM-7 segments. */
export const MAX_TEMPLATE_LENGTH = 459;

/** An account's own texts: template id → language (or BCP-47 tag) → text. */
export type CustomTemplates = Record<string, Record<string, string>>;

/** Why a custom template text cannot be used, or undefined when it can. */
export function validateTemplateText(text: string): string | undefined {
  if (text.trim() === "") return "must not be empty";
  if (text.length > MAX_TEMPLATE_LENGTH) return `must be at most ${MAX_TEMPLATE_LENGTH} characters`;
  if (!text.includes("{code}")) return "must contain {code}";
  for (const [, name] of text.matchAll(/\{([^{}]*)\}/g)) {
    if (name !== "code" && name !== "minutes")
      return `unknown placeholder {${name ?? ""}}: use {code} or {minutes}`;
  }
  // The code must reach the phone as a run of digits of its own, for the reader and for autofill.
  if (/(\d|\{minutes\})\{code\}|\{code\}(\d|\{minutes\})/.test(text)) {
    return "{code} must not touch other digits";
  }
  return undefined;
}

/** Account configuration of custom templates, for the edge where it enters (management API, CLI). */
export const customTemplatesSchema = z.record(
  z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, "template ids hold 1 to 64 letters, digits, '_' or '-'"),
  z.record(
    z.string().refine(isBcp47, "must be a language such as en or pt-BR"),
    z.string().superRefine((text, ctx) => {
      const problem = validateTemplateText(text);
      if (problem !== undefined) ctx.addIssue({ code: "custom", message: problem });
    }),
  ),
);

/** The Android SMS Retriever app hash: 11 characters of base64 (docs/v1-api.md#send-a-code: `app_realm`). */
export function isAppRealm(v: string): boolean {
  return /^[A-Za-z0-9+/]{11}$/.test(v);
}

export interface OtpSmsInput {
  /** The one-time code, digits only. */
  code: string;
  /** A locale from `resolveLocale`. */
  locale: string;
  /** Unset or "": `default`. */
  templateId?: string;
  customTemplates?: CustomTemplates;
  /** Code lifetime, a whole number of minutes, at least 1. */
  lifetimeMinutes: number;
  /** Android SMS Retriever app hash; unset or "" for a plain message. */
  appRealm?: string;
}

export interface RenderedSms {
  body: string;
  /** Locale of the text actually used: the requested one, or en-US when the text fell back to English. */
  locale: string;
  /** Template actually used (`default` after a fallback). */
  templateId: string;
}

/** Whether a template id names one of the account's variants or a built-in template. */
export function isKnownTemplate(templateId: string, custom: Readonly<Record<string, unknown>> = {}): boolean {
  return Object.hasOwn(custom, templateId) || Object.hasOwn(BUILT_IN, templateId);
}

/**
 * The OTP message. The text is looked up by template id (account templates first, then built-in)
 * for the locale's language, then the template's English text, then the `default` template. With
 * `appRealm`, the message follows the SMS Retriever format: `<#> ` + text + newline + app hash;
 * when that would not fit in one SMS (140 octets, which the Retriever requires), the same
 * language's `short` text is used instead.
 */
export function renderOtpSms(input: OtpSmsInput): RenderedSms {
  const { code, lifetimeMinutes: minutes, customTemplates: custom = {} } = input;
  if (!/^\d{1,20}$/.test(code)) throw new Error("renderOtpSms: the code must be digits");
  if (!Number.isInteger(minutes) || minutes < 1) {
    throw new Error("renderOtpSms: lifetimeMinutes must be a whole number of at least 1");
  }
  const appRealm = input.appRealm ?? "";
  if (appRealm !== "" && !isAppRealm(appRealm)) {
    throw new RingfenceError(
      "bad_request",
      "app_realm: must be the 11-character app hash of the SMS Retriever",
    );
  }
  const templateId =
    input.templateId === undefined || input.templateId === "" ? DEFAULT_TEMPLATE_ID : input.templateId;
  if (!isKnownTemplate(templateId, custom)) {
    throw badField("template_id", `unknown template ${quote(templateId)}`, "invalid_template_id");
  }
  const locale = canonicalOrFallback(input.locale);

  const render = (id: string): RenderedSms => {
    const chosen = pickText(id, locale, custom);
    const text = fill(chosen.text, code, minutes, chosen.locale);
    const body = appRealm === "" ? text : `<#> ${text}\n${appRealm}`;
    return { body, locale: chosen.locale, templateId: chosen.templateId };
  };
  const rendered = render(templateId);
  if (appRealm === "" || fitsOneSms(rendered.body) || rendered.templateId === "short") return rendered;
  const short = render("short");
  return fitsOneSms(short.body) ? short : rendered;
}

interface ChosenText {
  text: string | PluralText;
  locale: string;
  templateId: string;
}

function pickText(templateId: string, locale: string, custom: CustomTemplates): ChosenText {
  const keys = lookupKeys(locale);
  const own = usableTexts(Object.hasOwn(custom, templateId) ? custom[templateId] : undefined);
  const builtIn = Object.hasOwn(BUILT_IN, templateId) ? BUILT_IN[templateId] : undefined;
  const find = (candidates: readonly string[]): string | PluralText | undefined => {
    for (const key of candidates) {
      const text = own.get(key);
      if (text !== undefined) return text;
    }
    for (const key of candidates) {
      const text = builtIn !== undefined && Object.hasOwn(builtIn, key) ? builtIn[key] : undefined;
      if (text !== undefined) return text;
    }
    return undefined;
  };
  const inLanguage = find(keys);
  if (inLanguage !== undefined) return { text: inLanguage, locale, templateId };
  const english = find(["en"]);
  if (english !== undefined) {
    return { text: english, locale: languageOf(locale) === "en" ? locale : FALLBACK_LOCALE, templateId };
  }
  if (templateId !== DEFAULT_TEMPLATE_ID) return pickText(DEFAULT_TEMPLATE_ID, locale, custom);
  // Unreachable: the built-in default has an English text.
  throw new Error("renderOtpSms: no default text");
}

/** Keys to try for a locale, most specific first: `pt-AO` → `pt-AO`, `pt-PT`, `pt`. */
function lookupKeys(locale: string): string[] {
  const { language, region } = localeParts(locale);
  const keys = region === undefined ? [language] : [`${language}-${region}`, language];
  // Outside Brazil, Portuguese is written in the European norm.
  if (language === "pt" && region !== undefined && region !== "BR") keys.splice(1, 0, "pt-PT");
  return keys;
}

/** An account's texts for one template, keyed by canonical tag; unusable texts are left out. */
function usableTexts(texts: Record<string, string> | undefined): Map<string, string> {
  const map = new Map<string, string>();
  for (const [tag, text] of Object.entries(texts ?? {})) {
    if (!isBcp47(tag) || validateTemplateText(text) !== undefined) continue;
    map.set(canonicalLocale(tag) ?? tag, text);
  }
  return map;
}

function canonicalOrFallback(locale: string): string {
  return isBcp47(locale) ? (canonicalLocale(locale) ?? FALLBACK_LOCALE) : FALLBACK_LOCALE;
}

function fill(text: string | PluralText, code: string, minutes: number, locale: string): string {
  const chosen =
    typeof text === "string" ? text : pluralRules(locale).select(minutes) === "one" ? text.one : text.other;
  return chosen.replace(/\{(code|minutes)\}/g, (_, name: string) =>
    name === "code" ? code : String(minutes),
  );
}
