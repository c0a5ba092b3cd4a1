import { defineScript } from "../redis/script.js";
import { STREAM_LIBRARY } from "../webhooks/stream.js";
import { checkCodeWithEvents, WINDOW_LIBRARY } from "../otp/code.js";
import { ROW_EVENTS_LIBRARY } from "./row.js";
import { FRAUD_LIBRARY, type FraudRules } from "../fraud/engine.js";

/** The verification scripts, each called with the keys its file names at its top. */
const HOLD_LIBRARY = new URL("./hold.lua", import.meta.url);
const libraries = [WINDOW_LIBRARY, HOLD_LIBRARY, STREAM_LIBRARY, ROW_EVENTS_LIBRARY, FRAUD_LIBRARY];
const file = (name: string) => new URL(`./${name}.lua`, import.meta.url);

/** An authentication's row and the webhook pending set (row-events.lua names its events and hook). */
const AUTH = ["auth", "pending"] as const;
const MONEY = ["account", "spend"] as const;
/** The fraud engine's policy key (FraudSendKeys), the number's and sources' following as the tail `fraudTail`. */
const FRAUD = ["fraudPolicy"] as const;

export const sendCode = defineScript({
  file: file("send-code"),
  libraries,
  keys: [
    ...MONEY,
    ...AUTH,
    "numberWindow",
    "ipWindow",
    "deviceWindow",
    "accountWindow",
    "ipNumbers",
    "deviceNumbers",
    "range",
    "holds",
    "hold",
    "target",
    ...FRAUD,
  ],
  rest: "fraudTail",
  argv: ["args"],
});

export const retryCode = defineScript({
  file: file("retry-code"),
  libraries,
  keys: [...MONEY, "auth", "numberWindow", "accountWindow", "holds", "hold", ...FRAUD],
  rest: "fraudTail",
  argv: ["args"],
});

export const resolveHold = defineScript({
  file: file("resolve-hold"),
  libraries,
  keys: ["holds", "hold", "auth"],
  rest: "release",
  argv: ["holdId", "outcome", "sealed", "deadline"],
});

export const claimHold = defineScript({
  file: file("claim-hold"),
  keys: ["holds", "hold"],
  argv: ["holdId", "now", "deadline"],
});

/** The code check shared with login and step-up, its comparisons recorded as the row's events. */
export const checkCode = checkCodeWithEvents(ROW_EVENTS_LIBRARY);

export const appendEvent = defineScript({
  file: file("append-event"),
  libraries,
  keys: AUTH,
  argv: ["envelope", "compact"],
});

export const moveHold = defineScript({
  file: file("move-hold"),
  keys: ["holds", "hold", "account", "spend"],
  argv: ["holdId", "deadline", "later", "provider", "route", "channel", "price", "sealed"],
});

/** The next channel of a V2 code (docs/v2-api.md#fallback), prepended to the scripts that take it. */
const CHANNELS_LIBRARY = new URL("./channels.lua", import.meta.url);

export const undelivered = defineScript({
  file: file("undelivered"),
  libraries: [CHANNELS_LIBRARY],
  keys: ["auth", "account", "spend"],
  argv: ["attempt", "resent", "now", "channel", "own"],
});

export const nextChannel = defineScript({
  file: file("next-channel"),
  libraries: [CHANNELS_LIBRARY],
  keys: ["auth"],
  argv: ["attempt", "from", "now"],
});

export const reportOnce = defineScript({
  file: file("report-once"),
  keys: ["auth"],
  argv: ["field", "state"],
});

export const chargeResend = defineScript({
  file: file("charge-resend"),
  keys: ["auth", "account", "spend"],
  argv: ["attempt", "price", "mark"],
});

export const holdIndex = defineScript({
  file: file("hold-index"),
  keys: ["index", "earlierIndex"],
  argv: [],
});

export const holdsQuiet = defineScript({
  file: file("holds-quiet"),
  keys: ["holds"],
  argv: ["listedAt", "staleMs"],
});

export const unindexHolds = defineScript({
  file: file("unindex-holds"),
  keys: ["index"],
  argv: ["customer", "listedAt"],
});

export const saveFeedback = defineScript({
  file: file("save-feedback"),
  keys: ["feedback"],
  argv: ["status", "uuid", "at"],
});

/** A sliding-window rule of a send or retry; null when the rule is off. */
export interface Window {
  limit: number;
  windowSeconds: number;
}

/**
 * The send and retry scripts' settings (`CONFIG` in send-code.lua and retry-code.lua): fixed while
 * the service runs, so they are in the scripts' text (`Script.configured`), not in every call.
 */
export interface SendRules {
  retryIntervalMs: number;
  maxRetries: number;
  limits: { number: Window | null; ip: Window | null; device: Window | null; account: Window | null };
  spam: { ipNumbers: Window | null; deviceNumbers: Window | null; range: Window | null };
  /** The fraud engine's (engine.lua reads them as `f.rules`). */
  fraud: FraudRules;
}

/**
 * What the send and retry scripts need to record a hold: the charge of a message whose
 * provider answer is not recorded yet. `issuedAt` + `staleMs` bound when the script may still
 * act (later, the caller has been told 503); `deadline` is when recovery may take it over.
 */
export interface HoldArgs {
  issuedAt: number;
  staleMs: number;
  deadline: number;
  /** The outgoing message (`OutgoingSms` as JSON) sealed with Secrets: it holds the code. */
  sealed: string;
  /** The instance that sends it (for the logs of a recovery). */
  owner: string;
  /** The provider that carries it: a recovery re-sends through it and no other (docs/routing.md#hold-recovery). */
  provider: string;
  /** The destination of the route that chose the provider. */
  route: string;
}
