/**
 * What Intl works out from a locale tag, worked out once per tag: a send asks the same few tags
 * again and again, and `Intl.getCanonicalLocales`, `new Intl.Locale` and `new Intl.PluralRules`
 * each cost microseconds. Tags come from callers, so each cache holds at most TAGS_MAX of them and
 * starts again when full.
 */
const TAGS_MAX = 512;

function memo<T>(compute: (tag: string) => T): (tag: string) => T {
  const known = new Map<string, T>();
  return (tag) => {
    if (known.has(tag)) return known.get(tag) as T;
    const value = compute(tag);
    if (known.size >= TAGS_MAX) known.clear();
    known.set(tag, value);
    return value;
  };
}

/** The canonical form of a tag (`fr-ca` → `fr-CA`), undefined when Intl refuses it. */
export const canonicalLocale = memo((tag: string): string | undefined => {
  try {
    return Intl.getCanonicalLocales(tag)[0];
  } catch {
    return undefined;
  }
});

/** The language and region subtags of a canonical tag. */
export const localeParts = memo((tag: string): { language: string; region: string | undefined } => {
  const { language, region } = new Intl.Locale(tag);
  return { language, region };
});

/** The plural rules of a locale. */
export const pluralRules = memo((tag: string): Intl.PluralRules => new Intl.PluralRules(tag));
