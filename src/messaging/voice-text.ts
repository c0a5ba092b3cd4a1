/** What a voice call says, by language: `{digits}` is the code digit by digit (docs/v2-api.md#channels). */
const SPOKEN: Readonly<Record<string, string>> = {
  en: "Your verification code is: {digits}. Again, your code is: {digits}.",
  fr: "Votre code de vérification est : {digits}. Je répète, votre code est : {digits}.",
  es: "Su código de verificación es: {digits}. Repito, su código es: {digits}.",
  de: "Ihr Bestätigungscode lautet: {digits}. Noch einmal, Ihr Code lautet: {digits}.",
  it: "Il tuo codice di verifica è: {digits}. Ripeto, il tuo codice è: {digits}.",
  pt: "O seu código de verificação é: {digits}. Repito, o seu código é: {digits}.",
};

/**
 * The text a voice provider speaks for `code`: every digit on its own, so that a text-to-speech
 * engine never reads 123456 as a number, said twice, in the language of `locale` (a resolved
 * BCP-47 tag) when it has one, else English. Answers the text and the locale it is in.
 */
export function renderOtpVoice(code: string, locale: string): { body: string; locale: string } {
  if (!/^\d{1,20}$/.test(code)) throw new Error("renderOtpVoice: the code must be digits");
  const language = locale.split("-")[0]?.toLowerCase() ?? "en";
  const text = SPOKEN[language] ?? SPOKEN.en ?? "";
  const digits = code.split(/(?=\d)/).join(", ");
  return {
    body: text.replaceAll("{digits}", digits),
    locale: SPOKEN[language] === undefined ? "en" : locale,
  };
}
