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

/** `status` of a V2 creation (docs/v2-api.md#create). */
export const V2_CREATE_STATUSES = ["success", "retry", "blocked"] as const;
/** `reason` of a blocked V2 creation. */
export const V2_BLOCK_REASONS = ["repeated_attempts", "suspicious", "invalid_phone_line"] as const;
/** `status` of a V2 check (docs/v2-api.md#check). */
export const V2_CHECK_STATUSES = ["success", "failure", "expired_or_not_found"] as const;
export const V2_TARGET_TYPES = ["phone_number", "email_address"] as const;
export const V2_DEVICE_PLATFORMS = ["android", "ios", "ipados", "tvos", "web"] as const;
/** The one way this service sends a code: an SMS, `method` `message`. */
export const V2_METHOD = "message";
export const V2_CHANNELS = ["sms"] as const;
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

/** The target of a request, required: only phone numbers are verified here. */
function phoneTarget(target: Target | undefined, account: StoredAccount): ParsedNumber {
  if (target === undefined) throw badField("target", "is required");
  if (target.type === "email_address") {
    throw badField(
      "target.type",
      "email verification is not available: only phone numbers are verified",
      "email_verification_not_allowed",
    );
  }
  if (target.type !== "phone_number") {
    throw badField("target.type", `must be one of ${V2_TARGET_TYPES.join(", ")}`);
  }
  try {
    return phoneInRegions(target.value, account.regions);
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
      const phone = phoneTarget(req.target, account);
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
        method: V2_METHOD,
        reason,
        channels: status === "blocked" ? [] : [...V2_CHANNELS],
        metadata: metadataOf(correlation),
        requestId: ctx.requestId,
      });

      const request = {
        api: "v2" as const,
        phone,
        ip: signals.ip,
        deviceId: signals.deviceId,
        signals: {
          ip: signals.ip,
          deviceId: signals.deviceId,
          deviceType: signals.devicePlatform,
          appVersion: signals.appVersion,
          osVersion: signals.osVersion,
          deviceModel: signals.deviceModel,
          isReturningUser: signals.isTrustedUser,
        },
        locale: options.locale,
        templateId: options.templateId,
        senderId: options.senderId,
        appRealm: req.options?.appRealm?.value ?? "",
        callbackUrl: options.callbackUrl,
        correlationId,
        codeLength: options.codeSize ?? engine.code.length,
      };

      // A creation that another one overtook (both saw no running verification) looks again,
      // and then retries the one that came first: one verification per number at a time.
      for (let look = 1; ; look += 1) {
        const { indexed, auth } = await store.targetState(account.customerUuid, phone.e164);
        if (auth !== undefined && isRunning(auth, now(), engine.code.maxChecks)) {
          // Gone between the read and the retry (a refused first message is taken back): none runs.
          const r = await engine.retry(account, indexed, auth, ctx).catch((err: unknown) => {
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

        const sent = await engine.send(account, { ...request, indexed }, ctx);
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
      const phone = phoneTarget(req.target, account);
      if (req.code === "") throw badField("code", "is required");
      if (req.code.length > 32) throw badField("code", "must be at most 32 characters");
      // Two round trips: the index, then the check beside the correlation_id (one batch).
      const authUuid = await store.targetAuth(account.customerUuid, phone.e164);
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
  if (options.method === "voice") {
    throw badField(
      "options.method",
      "voice is not available: codes are sent by SMS",
      "channel_not_enabled_in_region",
    );
  }
  if (options.preferredChannel !== "" && options.preferredChannel !== "sms") {
    throw badField(
      "options.preferred_channel",
      `${quote(options.preferredChannel)} is not available: codes are sent by SMS`,
      "channel_not_enabled_in_region",
    );
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
