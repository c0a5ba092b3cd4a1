import { canonicalLocale, localeParts } from "./intl-cache.js";

/** Languages the built-in OTP texts are written in. */
export const SUPPORTED_LANGUAGES = ["en", "fr", "de", "es", "it", "pt"] as const;
export type SupportedLanguage = (typeof SUPPORTED_LANGUAGES)[number];

/** The language for an unsupported one, docs/v1-api.md#messages-and-locale (and what unknown countries get). */
export const FALLBACK_LOCALE = "en-US";

/**
 * The language a number's country reads its SMS in, when the caller gives no locale: a supported
 * language that is official there; in a multilingual country, the supported one most people speak
 * (CH → German, BE → French since Dutch is not supported, LU → French, CA → English). Countries not
 * listed (including those whose main language is not supported, such as MA or DZ) get en-US.
 */
const COUNTRY_LANGUAGE: Readonly<Record<SupportedLanguage, readonly string[]>> = {
  en: ["US", "GB", "IE", "AU", "NZ", "CA"],
  fr: [
    ...["FR", "BE", "LU", "MC", "HT"],
    // Overseas departments and collectivities, which have their own region in phone metadata.
    ...["GP", "MQ", "GF", "RE", "YT", "PM", "BL", "MF", "NC", "PF", "WF"],
    // Countries where French is the official written language.
    ...["SN", "CI", "ML", "BF", "NE", "TG", "BJ", "GA", "CG", "CD", "GN", "CM", "CF", "TD", "MG", "DJ", "KM"],
  ],
  de: ["DE", "AT", "CH", "LI"],
  es: [
    ...["ES", "MX", "AR", "BO", "CL", "CO", "CR", "CU", "DO", "EC", "GQ", "GT", "HN", "NI", "PA", "PE"],
    ...["PR", "PY", "SV", "UY", "VE"],
  ],
  it: ["IT", "SM", "VA"],
  pt: ["BR", "PT", "AO", "MZ", "CV", "GW", "ST", "TL"],
};

const COUNTRY_LOCALE: ReadonlyMap<string, string> = new Map(
  Object.entries(COUNTRY_LANGUAGE).flatMap(([language, countries]) =>
    countries.map((country) => [country, `${language}-${country}`] as const),
  ),
);

/** A well-formed BCP-47 tag (letters, digits and hyphens, 2–35 characters) that Intl accepts. */
export function isBcp47(tag: string): boolean {
  return /^[A-Za-z0-9-]{2,35}$/.test(tag) && canonicalTag(tag) !== undefined;
}

/** The primary language subtag of a tag, lower case (`pt-BR` → `pt`). */
export function languageOf(tag: string): string {
  const canonical = canonicalTag(tag);
  return canonical === undefined ? "" : localeParts(canonical).language;
}

export function isSupportedLanguage(language: string): language is SupportedLanguage {
  return (SUPPORTED_LANGUAGES as readonly string[]).includes(language);
}

/**
 * The locale of the SMS (specification, POST /authentication `locale`): the requested tag,
 * normalized (`fr-ca` → `fr-CA`), when its language is supported; en-US when it is not; when no
 * locale is requested (undefined or ""), the language of the number's country (ISO 3166 alpha-2)
 * with that country as region (`FR` → `fr-FR`), else en-US. Callers reject malformed tags first
 * (`isBcp47`); one that slips through is treated as unsupported.
 */
export function resolveLocale(requested: string | undefined, countryCode: string): string {
  if (requested !== undefined && requested !== "") {
    const canonical = /^[A-Za-z0-9-]{2,35}$/.test(requested) ? canonicalTag(requested) : undefined;
    return canonical !== undefined && isSupportedLanguage(languageOf(canonical))
      ? canonical
      : FALLBACK_LOCALE;
  }
  return COUNTRY_LOCALE.get(countryCode.toUpperCase()) ?? FALLBACK_LOCALE;
}

function canonicalTag(tag: string): string | undefined {
  return canonicalLocale(tag);
}
