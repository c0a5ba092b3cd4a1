import { createHash } from "node:crypto";
import { z } from "zod";
import { badField, badInput, quote, type ErrorCode } from "../errors.js";
import type { Handlers } from "../rpc/binding.js";
import { accountOf } from "../accounts/authenticate.js";
import type { VerifyServiceService } from "../gen/ringfence/verify/v1/verify_service.js";
import { isAppRealm, isBcp47 } from "../messaging/templates.js";
import { CREATE_FIELD_CODES, CreateAuthenticationInput, FEEDBACK_STATUSES } from "./model.js";
import { readBack } from "./read-back.js";
import { phoneInRegions } from "../net/validate.js";
import { unknownAuthentication, type VerifyEngine } from "./engine.js";

export { VerifyEngine } from "./engine.js";
export type { VerifyDeps } from "./deps.js";

/** The V1 verification: send a code, check it, retry, read back, feedback. */
export function verifyHandlers(engine: VerifyEngine): Handlers<typeof VerifyServiceService> {
  const { config, store } = engine.deps;
  const now = engine.deps.now ?? Date.now;

  return {
    async createAuthentication(req, ctx) {
      const input = parse(CreateAuthenticationInput, req, CREATE_FIELD_CODES);
      if (input.locale !== "" && !isBcp47(input.locale))
        throw badField("locale", "must be a BCP-47 language tag");
      checkAppRealm(input.appRealm, input.deviceType);
      const account = accountOf(ctx);
      if (input.senderId !== "" && !account.senderIds.includes(input.senderId)) {
        throw badField(
          "sender_id",
          `${quote(input.senderId)} is not one of this account's sender IDs`,
          "unauthorized_sender_id",
        );
      }
      // After authentication, so that anonymous callers cannot make the service resolve names.
      if (input.callbackUrl !== "") await engine.deps.outbound.checkUrl(input.callbackUrl, "callback_url");
      const phone = phoneInRegions(input.phoneNumber, account.regions);
      const sent = await engine.send(
        account,
        {
          api: "v1",
          phone,
          ip: input.ip,
          deviceId: input.deviceId,
          signals: {
            ip: input.ip,
            deviceId: input.deviceId,
            deviceType: input.deviceType,
            appVersion: input.appVersion,
            osVersion: input.osVersion,
            deviceModel: input.deviceModel,
            isReturningUser: input.isReturningUser,
          },
          locale: input.locale,
          templateId: input.templateId,
          senderId: input.senderId,
          appRealm: input.appRealm,
          callbackUrl: input.callbackUrl,
          correlationId: input.correlationId,
          codeLength: engine.code.length,
        },
        ctx,
      );
      // V1 names no target, so no other creation can overtake it.
      if (sent.status === "raced") throw new Error("a V1 send cannot be raced");
      return {
        authenticationUuid: sent.authUuid,
        status: sent.status,
        createdAt: sent.createdAt,
        expiresAt: sent.expiresAt,
      };
    },

    async checkAuthentication(req, ctx) {
      const authUuid = authUuidField(req.authenticationUuid);
      if (!/^\d{1,12}$/.test(req.checkCode)) throw badField("check_code", "must be the digits of the code");
      const account = accountOf(ctx);
      const status = await engine.check(account, authUuid, req.checkCode, "v1", ctx);
      if (status === "not_found") throw unknownAuthentication();
      return { authenticationUuid: authUuid, status };
    },

    async retryAuthentication(req, ctx) {
      const authUuid = authUuidField(req.authenticationUuid);
      const account = accountOf(ctx);
      const found = await store.get(account.customerUuid, authUuid);
      if (found === undefined || found.auth.api !== "v1") throw unknownAuthentication();
      const t = now();
      const r = await engine.retry(account, authUuid, found.auth, ctx);
      const remaining = Math.max(0, config.OTP_MAX_RETRIES - r.retries);
      const showNext =
        r.nextRetryAtMs > 0 &&
        remaining > 0 &&
        r.status !== "expired_auth" &&
        r.status !== "already_validated";
      return {
        authenticationUuid: authUuid,
        // The original SDKs know no spam answer to a retry, and V1 keeps to their models
        // (docs/v1-api.md#retry): a retry the fraud engine refuses is `rate_limited`.
        status: r.status === "spam_detected" ? "rate_limited" : r.status,
        createdAt: new Date(t).toISOString(),
        ...(showNext ? { nextRetryAt: new Date(r.nextRetryAtMs).toISOString() } : {}),
        remainingRetry: remaining,
      };
    },

    async getAuthentication(req, ctx) {
      const authUuid = authUuidField(req.authenticationUuid);
      const account = accountOf(ctx);
      const found = await store.get(account.customerUuid, authUuid);
      // A V2 verification's events are V2's: it is read through V2, not here.
      if (found === undefined || found.auth.api !== "v1") throw unknownAuthentication();
      return readBack(authUuid, found.auth, found.events, now());
    },

    async createFeedback(req, ctx) {
      const status = req.status;
      if (!(FEEDBACK_STATUSES as readonly string[]).includes(status)) {
        throw badField("status", `must be one of ${FEEDBACK_STATUSES.join(", ")}`, "invalid_feedback_status");
      }
      const account = accountOf(ctx);
      const phone = phoneInRegions(req.phoneNumber, account.regions);
      const uuid = stableUuid(`${account.customerUuid}|${phone.e164}|${status}`);
      const saved = await store.saveFeedback(
        account.customerUuid,
        phone.e164,
        status,
        uuid,
        new Date(now()).toISOString(),
      );
      if (!saved) {
        throw badField(
          "status",
          `${phone.e164} is already recorded as ${status} (feedback ${uuid})`,
          "duplicated_feedback_status",
        );
      }
      // A number onboarded by the customer converts its last code, as a right code does.
      if (status === "onboarded") await engine.converted("v1", account.customerUuid, phone.e164);
      return { uuid };
    },
  };
}

/** A UUID (version 8, RFC 9562) derived from a name, so a repeat gives the same one. */
function stableUuid(name: string): string {
  const b = createHash("sha256").update(name).digest().subarray(0, 16);
  b[6] = ((b[6] ?? 0) & 0x0f) | 0x80;
  b[8] = ((b[8] ?? 0) & 0x3f) | 0x80;
  const h = b.toString("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

function parse<T>(schema: z.ZodType<T>, value: unknown, codes: Record<string, ErrorCode> = {}): T {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  throw badInput(r.error, codes);
}

/**
 * `app_realm` (the Android SMS Retriever hash) needs `device_type` ANDROID: the original API's
 * codes tell a malformed hash, a missing device type and another device type apart.
 */
function checkAppRealm(appRealm: string, deviceType: string): void {
  if (appRealm === "") return;
  if (!isAppRealm(appRealm)) {
    throw badField("app_realm", "must be the 11-character Android SMS Retriever hash", "invalid_app_realm");
  }
  if (deviceType === "") {
    throw badField("app_realm", "requires device_type ANDROID", "app_realm_require_device_type");
  }
  if (deviceType !== "ANDROID") {
    throw badField(
      "app_realm",
      `requires device_type ANDROID, not ${deviceType}`,
      "unsupported_app_realm_device_type",
    );
  }
}

function authUuidField(value: string): string {
  if (!z.uuid().safeParse(value).success) {
    throw badField("authentication_uuid", `${quote(value)} is not a uuid`, "invalid_auth_uuid");
  }
  return value.toLowerCase();
}
