import { isIP } from "node:net";
import { z } from "zod";
import { badField, badInput, quote, RingfenceError, type ErrorCode } from "../errors.js";
import type { Handlers } from "../rpc/binding.js";
import { accountOf } from "../accounts/authenticate.js";
import type { StoredAccount } from "../accounts/account.js";
import type {
  CheckVerificationResponse,
  CreateVerificationResponse,
  Target,
  VerificationServiceService,
} from "../gen/ringfence/verify/v2/verification_service.js";
import { isAppRealm, isBcp47, isKnownTemplate } from "../messaging/templates.js";
import { httpUrlField, phoneInRegions } from "../net/validate.js";
import type { ParsedNumber } from "../phone/e164.js";
import type { VerifyEngine } from "./engine.js";
import { unavailable } from "./holds.js";
import { verificationId } from "./events.js";
import { optionalSenderId, optionalText } from "./model.js";
import type { StoredAuthentication } from "./store.js";
import { retryEmailCode, sendEmailCode } from "./email.js";
import type { EmailCodes } from "./deps.js";
import type { Channel } from "../messaging/providers.js";

/** `status` of a V2 creation (docs/v2-api.md#create). */
export const V2_CREATE_STATUSES = ["success", "retry", "blocked"] as const;
/** `reason` of a blocked V2 creation. */
export const V2_BLOCK_REASONS = ["repeated_attempts", "suspicious", "invalid_phone_line"] as const;
/** `status` of a V2 check (docs/v2-api.md#check). */
export const V2_CHECK_STATUSES = ["success", "failure", "expired_or_not_found"] as const;
export const V2_TARGET_TYPES = ["phone_number", "email_address"] as const;
export const V2_DEVICE_PLATFORMS = ["android", "ios", "ipados", "tvos", "web"] as const;
/** `method` of a creation: `voice` when a call comes first, else `message` (docs/v2-api.md#channels). */
export const V2_METHODS = ["message", "voice"] as const;
/** The channels a V2 code to a phone number goes by, as `preferred_channel` and `channels` name them. */
export const V2_CHANNELS = ["sms", "whatsapp", "voice"] as const satisfies readonly Channel[];
/** How many times a creation looks for the number's running verification when others overtake it. */
const MAX_LOOKS = 3;
/** Code digits a caller may ask for with `options.code_size`. */
export const CODE_SIZE = { min: 4, max: 8 } as const;

type BlockReason = (typeof V2_BLOCK_REASONS)[number];

/** The V2 fields whose refusal has a code of its own (the original V2 API's). */
const FIELD_CODES: Readonly<Record<string, ErrorCode>> = {
  "signals.device_id": "invalid_device_id",
  "signals.os_version": "invalid_os_version",
  "options.template_id": "invalid_template_id",
  "options.sender_id": "invalid_sender_id",
  "options.locale": "invalid_locale",
  "options.callback_url": "invalid_callback_url",
  "options.code_size": "invalid_code_size",
  "metadata.correlation_id": "invalid_correlation_id",
};

const SignalsInput = z.object({
  ip: z.string().refine((v) => v === "" || isIP(v) !== 0, "must be an IPv4 or IPv6 address"),
  deviceId: optionalText(256),
  devicePlatform: z.enum(["", ...V2_DEVICE_PLATFORMS], {
    error: `must be one of ${V2_DEVICE_PLATFORMS.join(", ")}`,
  }),
  deviceModel: optionalText(128),
  osVersion: optionalText(64),
  appVersion: optionalText(64),
  isTrustedUser: z.boolean().optional(),
  ja4Fingerprint: optionalText(128),
  userAgent: optionalText(512),
});

const OptionsInput = z.object({
  templateId: optionalText(64),
  locale: optionalText(35).refine((v) => v === "" || isBcp47(v), "must be a BCP-47 language tag"),
  senderId: optionalSenderId,
  codeSize: z
    .number()
    .int()
    .min(CODE_SIZE.min, `must be between ${CODE_SIZE.min} and ${CODE_SIZE.max}`)
    .max(CODE_SIZE.max, `must be between ${CODE_SIZE.min} and ${CODE_SIZE.max}`)
    .optional(),
  callbackUrl: httpUrlField({ required: false }),
  method: z.enum(["", "auto", "message", "voice"], { error: "must be one of auto, message, voice" }),
  preferredChannel: z.string(),
  customCode: z.string(),
  integration: z.enum(["", "auth0", "supabase"], { error: "must be one of auth0, supabase" }),
});

const CreateInput = z.object({
  signals: SignalsInput,
  options: OptionsInput,
  metadata: z.object({ correlationId: optionalText(64) }),
  dispatchId: optionalText(128),
});

/** A request's target, required: a phone number, or an email address the account may verify. */
type VerifiedTarget =
  { type: "phone_number"; phone: ParsedNumber; key: string } | { type: "email_address"; key: string };

const EMAIL = z.email({ error: "must be an email address" }).max(254, "must be at most 254 characters");

function targetOf(target: Target | undefined, account: StoredAccount, emails: boolean): VerifiedTarget {
  if (target === undefined) throw badField("target", "is required");
  if (target.type === "email_address") {
    if (!emails || !account.channels.includes("email")) {
      throw badField(
        "target.type",
        `email is not one of this account's channels (${account.channels.join(", ")})`,
        "email_verification_not_allowed",
      );
    }
    const parsed = EMAIL.safeParse(target.value);
    if (!parsed.success)
      throw badField("target.value", parsed.error.issues[0]?.message ?? "must be an email address");
    return { type: "email_address", key: parsed.data.toLowerCase() };
  }
  if (target.type !== "phone_number") {
    throw badField("target.type", `must be one of ${V2_TARGET_TYPES.join(", ")}`);
  }
  try {
    const phone = phoneInRegions(target.value, account.regions);
    return { type: "phone_number", phone, key: phone.e164 };
  } catch (err) {
    if (err instanceof RingfenceError) throw badField("target.value", err.message, err.code);
    throw err;
  }
}

/** A running verification: created, not checked right, not expired, with checks left. */
function isRunning(auth: StoredAuthentication, nowMs: number, maxChecks: number): boolean {
  return auth.status === "pending" && !auth.validated && nowMs < auth.expiresAtMs && auth.checks < maxChecks;
}

const metadataOf = (correlationId: string) => (correlationId === "" ? undefined : { correlationId });

/**
 * The V2 verify API (docs/v2-api.md) on the V1 engine: a creation for a number that has a
 * running verification retries it, and a check finds the verification by its number.
 */
export function verificationHandlers(engine: VerifyEngine): Handlers<typeof VerificationServiceService> {
  const { store } = engine.deps;
  const now = engine.deps.now ?? Date.now;

  return {
    async createVerification(req, ctx) {
      const account = accountOf(ctx);
      const target = targetOf(req.target, account, engine.deps.email !== undefined);
      const parsed = CreateInput.safeParse({
        signals: { ...emptySignals, ...req.signals },
        options: { ...emptyOptions, ...req.options },
        metadata: { correlationId: req.metadata?.correlationId ?? "" },
        dispatchId: req.dispatchId,
      });
      if (!parsed.success) throw badInput(parsed.error, FIELD_CODES);
      const { signals, options } = parsed.data;
      const correlationId = parsed.data.metadata.correlationId;
      checkOptions(req.options, options, account);
      const planned =
        target.type === "phone_number" ? planChannels(options, account, engine.deps.router) : undefined;
      const channels: readonly string[] = planned ?? emailOnly(options);
      if (options.callbackUrl !== "") {
        // After authentication, so that anonymous callers cannot make the service resolve names.
        const problem = await engine.deps.outbound.refusal(options.callbackUrl);
        if (problem !== undefined) throw badField("options.callback_url", problem, "invalid_callback_url");
      }

      const answer = (
        authUuid: string,
        status: (typeof V2_CREATE_STATUSES)[number],
        correlation: string,
        reason?: BlockReason,
      ): CreateVerificationResponse => ({
        id: verificationId(authUuid),
        status,
        method: channels[0] === "voice" ? "voice" : channels[0] === "email" ? "email" : "message",
        reason,
        channels: status === "blocked" ? [] : [...channels],
        metadata: metadataOf(correlation),
        requestId: ctx.requestId,
      });

      const signalsOf = {
        ip: signals.ip,
        deviceId: signals.deviceId,
        deviceType: signals.devicePlatform,
        appVersion: signals.appVersion,
        osVersion: signals.osVersion,
        deviceModel: signals.deviceModel,
        isReturningUser: signals.isTrustedUser,
      };
      const codeLength = options.codeSize ?? engine.code.length;
      const email = engine.deps.email;
      const send = (indexed: string) =>
        target.type === "email_address"
          ? sendEmailCode(
              engine,
              email as EmailCodes,
              account,
              {
                email: target.key,
                ip: signals.ip,
                deviceId: signals.deviceId,
                signals: signalsOf,
                locale: options.locale,
                callbackUrl: options.callbackUrl,
                correlationId,
                codeLength,
                indexed,
              },
              ctx,
            )
          : engine.send(
              account,
              {
                api: "v2",
                phone: target.phone,
                ip: signals.ip,
                deviceId: signals.deviceId,
                signals: signalsOf,
                locale: options.locale,
                templateId: options.templateId,
                senderId: options.senderId,
                appRealm: req.options?.appRealm?.value ?? "",
                callbackUrl: options.callbackUrl,
                correlationId,
                codeLength,
                channels: planned,
                indexed,
              },
              ctx,
            );
      const retry = (indexed: string, auth: StoredAuthentication) =>
        target.type === "email_address"
          ? retryEmailCode(engine, email as EmailCodes, account, indexed, auth, ctx)
          : engine.retry(account, indexed, auth, ctx);

      // A creation that another one overtook (both saw no running verification) looks again,
      // and then retries the one that came first: one verification per number at a time.
      for (let look = 1; ; look += 1) {
        const { indexed, auth } = await store.targetState(account.customerUuid, target.key);
        if (auth !== undefined && isRunning(auth, now(), engine.code.maxChecks)) {
          // Gone between the read and the retry (a refused first message is taken back): none runs.
          const r = await retry(indexed, auth).catch((err: unknown) => {
            if (err instanceof RingfenceError && err.code === "no_associated_auth_found") return undefined;
            throw err;
          });
          if (r?.status === "approved") return answer(indexed, "retry", auth.correlationId);
          if (r?.status === "denied" || r?.status === "rate_limited") {
            // Too soon, or out of retries: the running verification and its code stay.
            return answer(indexed, "blocked", auth.correlationId, "repeated_attempts");
          }
          // The fraud engine refused the new message: the running verification and its code stay
          // (a new verification would be judged, counted and recorded a second time).
          if (r?.status === "spam_detected")
            return answer(indexed, "blocked", auth.correlationId, "suspicious");
          // Expired, checked or gone between the read and the retry: a new verification starts.
        }

        const sent = await send(indexed);
        if (sent.status === "raced") {
          if (look < MAX_LOOKS) continue;
          throw unavailable("verifications of this number are being created concurrently; try again");
        }
        if (sent.status === "pending") return answer(sent.authUuid, "success", correlationId);
        if (sent.status === "rate_limited") {
          return answer(sent.authUuid, "blocked", correlationId, "repeated_attempts");
        }
        const reason = sent.refusedBy === "SPAM_LINE_TYPES" ? "invalid_phone_line" : "suspicious";
        return answer(sent.authUuid, "blocked", correlationId, reason);
      }
    },

    async checkVerification(req, ctx): Promise<CheckVerificationResponse> {
      const account = accountOf(ctx);
      const target = targetOf(req.target, account, engine.deps.email !== undefined);
      if (req.code === "") throw badField("code", "is required");
      if (req.code.length > 32) throw badField("code", "must be at most 32 characters");
      // Two round trips: the index, then the check beside the correlation_id (one batch).
      const authUuid = await store.targetAuth(account.customerUuid, target.key);
      if (authUuid === undefined) {
        return { status: "expired_or_not_found", metadata: undefined, requestId: ctx.requestId };
      }
      const [status, correlationId] = await Promise.all([
        engine.check(account, authUuid, req.code, "v2", ctx),
        store.correlationId(account.customerUuid, authUuid),
      ]);
      if (status === "not_found") {
        return { status: "expired_or_not_found", metadata: undefined, requestId: ctx.requestId };
      }
      return {
        id: verificationId(authUuid),
        status: status === "valid" ? "success" : status === "invalid" ? "failure" : "expired_or_not_found",
        metadata: metadataOf(correlationId),
        requestId: ctx.requestId,
      };
    },
  };
}

const emptySignals = {
  ip: "",
  deviceId: "",
  devicePlatform: "",
  deviceModel: "",
  osVersion: "",
  appVersion: "",
  isTrustedUser: undefined,
  ja4Fingerprint: "",
  userAgent: "",
};

const emptyOptions = {
  templateId: "",
  locale: "",
  senderId: "",
  appRealm: undefined,
  codeSize: undefined,
  callbackUrl: "",
  method: "",
  preferredChannel: "",
  customCode: "",
  integration: "",
  variables: {},
};

/**
 * The channels of a verification, in the order it falls back through them (docs/v2-api.md#channels):
 * the one asked for (`method: "voice"`, else `preferred_channel`) first, then the account's other
 * channels in its order; only channels a provider serves. One asked for that the account does not
 * allow or no provider serves is refused, naming it.
 */
function planChannels(
  options: z.infer<typeof OptionsInput>,
  account: StoredAccount,
  router: { readonly providers: readonly { spec: { channel: Channel } }[] },
): [Channel, ...Channel[]] {
  const served = (c: string) => router.providers.some((p) => p.spec.channel === c);
  const phoneChannels = account.channels.filter(
    (c): c is Channel => (V2_CHANNELS as readonly string[]).includes(c) && served(c),
  );
  const field = options.method === "voice" ? "options.method" : "options.preferred_channel";
  const asked = options.method === "voice" ? "voice" : options.preferredChannel;
  if (asked !== "") {
    const refuse = (why: string) =>
      badField(field, `${quote(asked)} ${why}`, "channel_not_enabled_in_region");
    if (!(V2_CHANNELS as readonly string[]).includes(asked)) {
      throw refuse(`is not available: codes go by ${V2_CHANNELS.join(", ")}`);
    }
    if (!account.channels.includes(asked as Channel)) {
      throw refuse(`is not one of this account's channels (${account.channels.join(", ")})`);
    }
    if (!served(asked)) throw refuse("is served by no provider of this service");
    return [asked as Channel, ...phoneChannels.filter((c) => c !== asked)];
  }
  const [first, ...rest] = phoneChannels;
  if (first === undefined) {
    throw badField(
      "target.type",
      `this account's channels (${account.channels.join(", ")}) reach no phone number here`,
      "channel_not_enabled_in_region",
    );
  }
  return [first, ...rest];
}

/** The channels of an email target: email alone; a phone channel asked for is refused, naming it. */
function emailOnly(options: z.infer<typeof OptionsInput>): readonly ["email"] {
  const field = options.method === "voice" ? "options.method" : "options.preferred_channel";
  const asked = options.method === "voice" ? "voice" : options.preferredChannel;
  if (asked !== "") {
    throw badField(
      field,
      `${quote(asked)} does not reach an email address: its code goes by email`,
      "channel_not_enabled_in_region",
    );
  }
  return ["email"];
}

/** The option rules beyond each field's shape: what this service can send, and for whom. */
function checkOptions(
  raw:
    | { appRealm?: { platform: string; value: string } | undefined; variables?: Record<string, string> }
    | undefined,
  options: z.infer<typeof OptionsInput>,
  account: StoredAccount,
): void {
  if (options.customCode !== "") {
    throw badField("options.custom_code", "custom codes are not available", "custom_code_not_allowed");
  }
  if (Object.keys(raw?.variables ?? {}).length > 0) {
    throw badField("options.variables", "templates take no variables here", "invalid_template_variables");
  }
  const realm = raw?.appRealm;
  if (realm !== undefined) {
    if (realm.platform === "" || realm.value === "") {
      throw badField("options.app_realm", "needs both platform and value", "invalid_app_realm");
    }
    if (realm.platform !== "android") {
      throw badField("options.app_realm.platform", "must be android", "invalid_app_realm_platform");
    }
    if (!isAppRealm(realm.value)) {
      throw badField(
        "options.app_realm.value",
        "must be the 11-character Android SMS Retriever hash",
        "invalid_app_realm_value",
      );
    }
  }
  if (options.templateId !== "" && !isKnownTemplate(options.templateId, account.templates)) {
    throw badField(
      "options.template_id",
      `${quote(options.templateId)} is not a template of this account`,
      "invalid_template_id",
    );
  }
  if (options.senderId !== "" && !account.senderIds.includes(options.senderId)) {
    throw badField(
      "options.sender_id",
      `${quote(options.senderId)} is not one of this account's sender IDs`,
      "invalid_sender_id",
    );
  }
}
