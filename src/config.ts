/**
 * The composition root of the settings: each folder's slice (`src/<domain>/settings.ts`, a
 * setting's rule and its docs side by side), loaded by the shared loader (`src/settings/`), and
 * the sections of docs/settings.md they are listed under (`npm run generate`, src/config-docs.ts).
 */
import { accountsSettings } from "./accounts/settings.js";
import { deliverySettings } from "./delivery/settings.js";
import { fraudSettings } from "./fraud/settings.js";
import { lookupSettings } from "./lookup/settings.js";
import { messagingSettings } from "./messaging/settings.js";
import { oauthSettings } from "./oauth/settings.js";
import { otpSettings } from "./otp/settings.js";
import { sessionSettings } from "./session/settings.js";
import * as define from "./settings/define.js";
import { definitionsOf, loadSettings, type Loaded } from "./settings/load.js";
import { stepUpSettings } from "./stepup/settings.js";
import { v1Settings } from "./v1/settings.js";
import { verifySettings } from "./verify/settings.js";
import { webhookSettings } from "./webhooks/settings.js";

export { ConfigError } from "./settings/define.js";
export { MAX_WORKERS } from "./settings/shared.js";

/** Every slice besides the shared layer's, in the order docs/settings.md lists them within a section. */
const SLICES = [
  oauthSettings,
  sessionSettings,
  stepUpSettings,
  v1Settings,
  messagingSettings,
  deliverySettings,
  otpSettings,
  verifySettings,
  lookupSettings,
  fraudSettings,
  accountsSettings,
  webhookSettings,
] as const;

/** Every setting, the shared layer's first, by name. */
const DEFINITIONS = definitionsOf(SLICES);

/** The whole configuration: every slice's settings. A domain takes its own slice, not this. */
export type Config = Loaded<typeof SLICES>;

/** The name of every setting the slices read. */
export type SettingName = Exclude<keyof Config, "devDefaults">;

/** Every setting the slices read, in their order. */
export function settingNames(): SettingName[] {
  return [...DEFINITIONS.keys()] as SettingName[];
}

/**
 * Reads and validates the environment; throws a ConfigError with one line naming the variable
 * and the rule it breaks, quoting the value only when it is not a secret.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  return loadSettings(SLICES, env);
}

/**
 * The sections of docs/settings.md, in order; their titles are the headings other documents link
 * to (`docs/settings.md#session-abuse-limits`), so keep them. `intro` and `outro` are Markdown.
 */
export const SETTING_SECTIONS = {
  service: { title: "Service and network" },
  gateway: {
    title: "Built-in gateway",
    intro:
      "Timeouts for slow clients of the built-in REST gateway (`HTTP_PORT`), enforced within 250 ms of " +
      "their setting; see [gateway.md](gateway.md#slow-clients-and-refused-bodies). Behind Envoy its own " +
      "timeouts apply.",
  },
  redis: { title: "Redis" },
  secrets: { title: "Secrets and production mode" },
  tokens: { title: "Tokens and sessions" },
  v1: { title: "V1" },
  delivery: {
    title: "Message delivery",
    outro:
      "Provider URLs are set by the operator and are not subject to the outbound-address rules " +
      "([verify.md](verify.md#outbound-addresses)).",
  },
  routing: {
    title: "Delivery routes",
    intro:
      "How routes choose among `DELIVERY_PROVIDERS` and when a provider is skipped; see " +
      "[routing.md](routing.md).",
  },
  otp: { title: "One-time codes", intro: "Used by V1 and V2 verification and by login and step-up codes." },
  retention: {
    title: "Retention",
    intro:
      "How long Redis keeps what a send leaves behind; what each costs is in [capacity.md](capacity.md).",
  },
  sends: {
    title: "Send windows and spam",
    intro:
      "V1 and V2 sends and retries (and, where noted in [session-api.md](session-api.md#abuse-limits), " +
      "login and step-up SMS).",
  },
  fraud: {
    title: "Fraud engine",
    intro:
      "The adaptive rules every code-carrying send goes through; how they decide, with the numbers: " +
      "[fraud.md](fraud.md#how-it-decides).",
  },
  session: {
    title: "Session abuse limits",
    intro:
      "What each limit counts, and what a full window answers: " +
      "[session-api.md](session-api.md#abuse-limits).",
  },
  webhooks: {
    title: "Webhooks",
    intro:
      "Delivery is at least once, retried with exponential backoff, and shared fairly between " +
      "endpoints: one that is slow or hangs holds back its own deliveries only.",
  },
  holds: {
    title: "SMS holds",
    intro:
      "A charged V1 message is held until its provider's answer is recorded " +
      "([verify.md](verify.md#charges-through-faults)).",
  },
  workers: {
    title: "Workers",
    intro:
      "What runs in which process, SMPP binds, crashes, shutdown and the log fields of each process: " +
      "[operations.md](operations.md#workers).",
  },
} as const satisfies Record<string, { title: string; intro?: string; outro?: string }>;

export interface SettingDoc {
  section: keyof typeof SETTING_SECTIONS;
  /** What it does, in Markdown. */
  text: string;
  /** The default as an operator reads it, when it is not the schema's own default written back. */
  default?: string;
  /** The values allowed, when the schema cannot say it in words (numbers and choices it can). */
  rule?: string;
}

const isSection = (section: string): section is keyof typeof SETTING_SECTIONS => section in SETTING_SECTIONS;

/** What every setting does, for docs/settings.md, from its slice; a setting of an unknown section stops here. */
export const SETTING_DOCS = Object.fromEntries(
  [...DEFINITIONS].map(([name, { section, text, default: shown, rule }]): [string, SettingDoc] => {
    if (!isSection(section)) throw new Error(`setting ${name}: no section ${section} in SETTING_SECTIONS`);
    return [
      name,
      {
        section,
        text,
        ...(shown === undefined ? {} : { default: shown }),
        ...(rule === undefined ? {} : { rule }),
      },
    ];
  }),
) as Record<SettingName, SettingDoc>;

/** Why each development default is unsafe, for the start-up warning and the production refusal. */
export const DEV_ONLY: Record<string, string> = Object.fromEntries(
  [...DEFINITIONS].flatMap(([name, def]) => (def.devOnly === undefined ? [] : [[name, def.devOnly.why]])),
);

/** A value as a start-up error may quote it: never a secret, never a URL's password, never long. */
export function shownValue(name: string, value: string | undefined): string {
  return define.shownValue(DEFINITIONS.get(name), value);
}

/** The rule of a number or a list of choices, read off the schema; undefined for the others. */
export function schemaRule(name: string): string | undefined {
  const def = DEFINITIONS.get(name);
  return def === undefined ? undefined : define.schemaRule(def);
}

/** A setting's default as the environment would spell it (`5/600`, `PremiumRate,SharedCost`), if any. */
export function schemaDefault(name: SettingName): string | undefined {
  const def = DEFINITIONS.get(name);
  return def === undefined ? undefined : define.schemaDefault(def);
}
