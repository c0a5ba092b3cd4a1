import { resolveLocale } from "./locale.js";
import { localeParts, pluralRules } from "./intl-cache.js";

/** Why the code is sent: to sign in, or to confirm a sensitive action of a signed-in user. */
export type OtpEmailPurpose = "login" | "step_up";

/** A text whose unit agrees with the lifetime (`1 minute`, `10 minutes`), chosen by Intl.PluralRules. */
interface PluralText {
  one: string;
  other: string;
}

interface EmailTexts {
  /** Never holds the code: subjects show in notifications and lists the user may not be alone with. */
  subject: Readonly<Record<OtpEmailPurpose, string>>;
  /** The line before the code. */
  intro: Readonly<Record<OtpEmailPurpose, string>>;
  /** The line after the code; `{minutes}` is the lifetime. */
  expiry: PluralText;
  /** What to do if the reader did not ask for the code. */
  closing: Readonly<Record<OtpEmailPurpose, string>>;
}

/** By language, or language-region where a region writes differently; every supported language. */
const TEXTS: Readonly<Record<string, EmailTexts>> = {
  en: {
    subject: { login: "Your sign-in code", step_up: "Your verification code" },
    intro: { login: "Enter this code to sign in:", step_up: "Enter this code to confirm it's you:" },
    expiry: { one: "It expires in {minutes} minute.", other: "It expires in {minutes} minutes." },
    closing: {
      login: "If you did not try to sign in, you can ignore this email. Never share this code with anyone.",
      step_up:
        "If you did not ask for this code, someone may be trying to use your account: do not share it with anyone.",
    },
  },
  fr: {
    subject: { login: "Votre code de connexion", step_up: "Votre code de vérification" },
    intro: {
      login: "Saisissez ce code pour vous connecter :",
      step_up: "Saisissez ce code pour confirmer qu'il s'agit bien de vous :",
    },
    expiry: { one: "Il expire dans {minutes} minute.", other: "Il expire dans {minutes} minutes." },
    closing: {
      login:
        "Si vous n'avez pas essayé de vous connecter, vous pouvez ignorer cet e-mail. Ne communiquez jamais ce code à personne.",
      step_up:
        "Si vous n'avez pas demandé ce code, quelqu'un essaie peut-être d'utiliser votre compte : ne le communiquez à personne.",
    },
  },
  de: {
    subject: { login: "Ihr Anmeldecode", step_up: "Ihr Bestätigungscode" },
    intro: {
      login: "Geben Sie diesen Code ein, um sich anzumelden:",
      step_up: "Geben Sie diesen Code ein, um zu bestätigen, dass Sie es sind:",
    },
    expiry: { one: "Er ist {minutes} Minute gültig.", other: "Er ist {minutes} Minuten gültig." },
    closing: {
      login:
        "Wenn Sie nicht versucht haben, sich anzumelden, können Sie diese E-Mail ignorieren. Geben Sie diesen Code niemals weiter.",
      step_up:
        "Wenn Sie diesen Code nicht angefordert haben, versucht möglicherweise jemand, Ihr Konto zu verwenden: Geben Sie ihn an niemanden weiter.",
    },
  },
  es: {
    subject: { login: "Tu código de inicio de sesión", step_up: "Tu código de verificación" },
    intro: {
      login: "Introduce este código para iniciar sesión:",
      step_up: "Introduce este código para confirmar que eres tú:",
    },
    expiry: { one: "Expira en {minutes} minuto.", other: "Expira en {minutes} minutos." },
    closing: {
      login:
        "Si no has intentado iniciar sesión, puedes ignorar este correo. No compartas nunca este código con nadie.",
      step_up:
        "Si no has solicitado este código, es posible que alguien esté intentando usar tu cuenta: no lo compartas con nadie.",
    },
  },
  it: {
    subject: { login: "Il tuo codice di accesso", step_up: "Il tuo codice di verifica" },
    intro: {
      login: "Inserisci questo codice per accedere:",
      step_up: "Inserisci questo codice per confermare che sei tu:",
    },
    expiry: { one: "Scade tra {minutes} minuto.", other: "Scade tra {minutes} minuti." },
    closing: {
      login:
        "Se non hai provato ad accedere, puoi ignorare questa email. Non condividere mai questo codice con nessuno.",
      step_up:
        "Se non hai richiesto questo codice, qualcuno potrebbe cercare di usare il tuo account: non condividerlo con nessuno.",
    },
  },
  // Brazilian by default; European Portuguese for Portugal and the other Lusophone countries.
  pt: {
    subject: { login: "Seu código de acesso", step_up: "Seu código de verificação" },
    intro: {
      login: "Digite este código para entrar:",
      step_up: "Digite este código para confirmar que é você:",
    },
    expiry: { one: "Ele expira em {minutes} minuto.", other: "Ele expira em {minutes} minutos." },
    closing: {
      login:
        "Se você não tentou entrar, pode ignorar este e-mail. Nunca compartilhe este código com ninguém.",
      step_up:
        "Se você não solicitou este código, alguém pode estar tentando usar sua conta: não o compartilhe com ninguém.",
    },
  },
  "pt-PT": {
    subject: { login: "O seu código de acesso", step_up: "O seu código de verificação" },
    intro: {
      login: "Introduza este código para iniciar sessão:",
      step_up: "Introduza este código para confirmar a sua identidade:",
    },
    expiry: { one: "Expira dentro de {minutes} minuto.", other: "Expira dentro de {minutes} minutos." },
    closing: {
      login:
        "Se não tentou iniciar sessão, pode ignorar este e-mail. Nunca partilhe este código com ninguém.",
      step_up:
        "Se não pediu este código, alguém pode estar a tentar utilizar a sua conta: não o partilhe com ninguém.",
    },
  },
};

export interface OtpEmailInput {
  /** The one-time code, digits only. */
  code: string;
  /** The requested BCP-47 locale; unset or "" for en-US. Unsupported languages get en-US. */
  locale?: string | undefined;
  /** Code lifetime, a whole number of minutes, at least 1. */
  lifetimeMinutes: number;
  purpose: OtpEmailPurpose;
}

export interface RenderedEmail {
  subject: string;
  /** Plain text, lines separated by `\n`; the code is a line of its own. */
  body: string;
  /** Locale of the text: the requested one normalized (`fr-ca` → `fr-CA`), or en-US. */
  locale: string;
}

/**
 * The OTP email: a subject without the code, and a short plain-text body with the code alone on
 * its line, as a run of digits (docs/decisions.md#8-message-delivery-providers), then its lifetime and a warning.
 */
export function renderOtpEmail(input: OtpEmailInput): RenderedEmail {
  const { code, lifetimeMinutes: minutes, purpose } = input;
  if (!/^\d{1,20}$/.test(code)) throw new Error("renderOtpEmail: the code must be digits");
  if (!Number.isInteger(minutes) || minutes < 1) {
    throw new Error("renderOtpEmail: lifetimeMinutes must be a whole number of at least 1");
  }
  const locale = resolveLocale(input.locale, "");
  const texts = textsFor(locale);
  const expiry = pluralRules(locale).select(minutes) === "one" ? texts.expiry.one : texts.expiry.other;
  const body = [
    texts.intro[purpose],
    "",
    code,
    "",
    expiry.replace("{minutes}", String(minutes)),
    "",
    texts.closing[purpose],
  ].join("\n");
  return { subject: texts.subject[purpose], body, locale };
}

/** The texts of a resolved locale, most specific key first: `pt-AO` → `pt-AO`, `pt-PT`, `pt`. */
function textsFor(locale: string): EmailTexts {
  const { language, region } = localeParts(locale);
  const keys = region === undefined ? [language] : [`${language}-${region}`, language];
  // Outside Brazil, Portuguese is written in the European norm.
  if (language === "pt" && region !== undefined && region !== "BR") keys.splice(1, 0, "pt-PT");
  for (const key of keys) {
    if (Object.hasOwn(TEXTS, key)) {
      const texts = TEXTS[key];
      if (texts !== undefined) return texts;
    }
  }
  // resolveLocale answers supported languages only, each of which has texts; en-US otherwise.
  const english = TEXTS.en;
  if (english === undefined) throw new Error("renderOtpEmail: no English texts");
  return english;
}
