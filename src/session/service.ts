import { randomUUID } from "node:crypto";
import { badField, RingfenceError } from "../errors.js";
import type { Config } from "../config.js";
import type { Logger } from "../log.js";
import type { Secrets } from "../crypto/secrets.js";
import type { RedisClient } from "../redis/client.js";
import type { Handlers } from "../rpc/binding.js";
import { HTTP_STATUS_MARKER, noStore } from "../rpc/binding.js";
import type { SessionServiceService } from "../gen/ringfence/session/v1/session_service.js";
import type { AppStore } from "../apps/store.js";
import type { AppEvents } from "../apps/webhooks.js";
import type { SigningKeys } from "../oauth/keys/signing-keys.js";
import type { CachedKeySet } from "../oauth/keys/key-set.js";
import { checkCode, hashCode, newCode } from "../otp/code.js";
import { parseE164 } from "../lookup/numbers.js";
import { isEmailAddress } from "../messaging/email.js";
import type { ChallengeStore } from "./challenges.js";
import type { CodeSender } from "./delivery.js";
import { readToken, type SessionStore } from "./sessions.js";
import { authenticateCaller, issueSessionToken } from "./tokens.js";
import type { Identifier, UserStore } from "./users.js";

/** The scope of the password-change flow. */
export const PASSWORD_SCOPE = "svc:pwd:write";

/** Session and token events go to the app's webhooks. */
export type AppEventSink = AppEvents;

export interface SessionDeps {
  config: Config;
  log: Logger;
  redis: RedisClient;
  secrets: Secrets;
  apps: AppStore;
  users: UserStore;
  sessions: SessionStore;
  challenges: ChallengeStore;
  signingKeys: SigningKeys;
  /** The published keys, cached, to verify session tokens on every user call. */
  keySet: CachedKeySet;
  codes: CodeSender;
  events: AppEventSink;
}

export interface TokenSet {
  accessToken: string;
  refreshToken: string;
  expiresIn: number;
  scope: string;
}

/** The caller-facing contract of sessions; createAppWebhook is bound by the app webhooks module. */
export function sessionHandlers(
  deps: SessionDeps,
  createAppWebhook: Handlers<typeof SessionServiceService>["createAppWebhook"],
): Handlers<typeof SessionServiceService> {
  const { config } = deps;
  const issuer = config.ISSUER_URL;
  const auth = { keySet: deps.keySet, sessions: deps.sessions, issuer };

  async function tokens(
    userId: string,
    sessionId: string,
    appId: string,
    scopes: string[],
    jti: string,
    refreshToken: string,
  ): Promise<TokenSet> {
    const accessToken = await issueSessionToken(deps.signingKeys, {
      issuer,
      userId,
      sessionId,
      appId,
      scopes,
      jti,
      lifetimeSeconds: config.SESSION_TOKEN_TTL_SECONDS,
    });
    return {
      accessToken,
      refreshToken,
      expiresIn: config.SESSION_TOKEN_TTL_SECONDS,
      scope: scopes.join(" "),
    };
  }

  return {
    async startOtpLogin(req, ctx) {
      noStore(ctx);
      const app = await deps.apps.get(req.appId);
      if (app === undefined) throw badField("app_id", "unknown app");
      const identifier = readIdentifier(req.identifier);
      await deps.codes.allowLogin(app.appId, identifier, ctx.clientAddress);
      const code = newCode(config.OTP_LENGTH);
      const expiresAtMs = Date.now() + config.OTP_TTL_SECONDS * 1000;
      const challenge = await deps.challenges.createLogin(app.appId, identifier, expiresAtMs, (id) =>
        hashCode(deps.secrets, id, code),
      );
      try {
        await deps.codes.send(app.appId, identifier, code, "login", config.OTP_TTL_SECONDS);
      } catch (err) {
        await deps.challenges.remove(challenge.key);
        throw err;
      }
      return { challengeToken: challenge.token, expiresAt: new Date(expiresAtMs).toISOString() };
    },

    async checkOtpLogin(req, ctx) {
      noStore(ctx);
      const ref = deps.challenges.readLogin(req.challengeToken);
      const login = ref === undefined ? undefined : await deps.challenges.loginOf(ref.key);
      if (ref === undefined || login === undefined)
        throw new RingfenceError("expired_challenge", "unknown or expired challenge_token");
      await deps.codes.allowCheck({ appId: login.appId, id: login.identifier });
      await checked(deps, ref.key, hashCode(deps.secrets, ref.id, req.code));
      const { user, created } = await deps.users.findOrCreate(login.appId, login.identifier);
      const jti = randomUUID();
      const grant =
        req.grantChangePassword === true
          ? {
              scope: PASSWORD_SCOPE,
              untilMs: Date.now() + config.CHANGE_PASSWORD_GRANT_SECONDS * 1000,
              mode: "single-use" as const,
            }
          : undefined;
      const { sessionId, refreshToken } = await deps.sessions.open(user.userId, login.appId, jti, grant);
      await deps.challenges.remove(ref.key);
      await deps.events.emit(login.appId, "session.created", {
        user_id: user.userId,
        session_id: sessionId,
        new_user: created,
      });
      if (grant !== undefined) {
        await deps.events.emit(login.appId, "scope.granted", {
          user_id: user.userId,
          session_id: sessionId,
          scope: grant.scope,
          granted_for: config.CHANGE_PASSWORD_GRANT_SECONDS,
          grant_mode: grant.mode,
          via: "login",
        });
      }
      return tokens(
        user.userId,
        sessionId,
        login.appId,
        grant === undefined ? [] : [grant.scope],
        jti,
        refreshToken,
      );
    },

    async refreshSession(req, ctx) {
      noStore(ctx);
      if ((req.refreshToken === "") === (req.stepUpToken === "")) {
        throw badField("refresh_token", "give exactly one of refresh_token and step_up_token");
      }
      const jti = randomUUID();
      let userId: string;
      let sessionId: string;
      let result: Awaited<ReturnType<SessionStore["refresh"]>>;
      let stepUpScope: string | undefined;
      let appId: string;
      if (req.refreshToken !== "") {
        const parsed = readToken("rt", req.refreshToken);
        if (parsed === undefined) throw new RingfenceError("invalid_token", "malformed refresh_token");
        ({ userId, id: sessionId } = parsed);
        appId = (await deps.sessions.appOf(userId, sessionId)) ?? "";
        result = await deps.sessions.refresh(userId, sessionId, { refreshHash: parsed.hash }, jti);
      } else {
        const parsed = deps.challenges.readStepUpToken(req.stepUpToken);
        const owner = parsed === undefined ? undefined : await deps.challenges.stepUpTokenOwner(parsed.key);
        if (parsed === undefined || owner === undefined) {
          throw new RingfenceError("invalid_token", "unknown, used or expired step_up_token");
        }
        ({ userId } = parsed);
        ({ sessionId, scope: stepUpScope } = owner);
        appId = (await deps.sessions.appOf(userId, sessionId)) ?? "";
        result = await deps.sessions.refresh(userId, sessionId, { stepUpKey: parsed.key }, jti);
      }
      if (result.outcome !== "ok") {
        if (result.outcome === "reused") {
          deps.log.warn("refresh token reused: session revoked", { user_id: userId });
          await deps.events.emit(appId, "session.revoked", {
            user_id: userId,
            session_id: sessionId,
            reason: "refresh_token_reused",
          });
        }
        throw new RingfenceError(
          "invalid_token",
          result.outcome === "reused"
            ? "refresh token reused: the session is revoked"
            : "unknown, used or expired token",
        );
      }
      if (stepUpScope !== undefined) {
        await deps.events.emit(appId, "scope.granted", {
          user_id: userId,
          session_id: sessionId,
          scope: stepUpScope,
          via: "step_up",
        });
      }
      return tokens(userId, sessionId, appId, result.scopes, jti, result.refreshToken);
    },

    async logout(_req, ctx) {
      const caller = await authenticateCaller(ctx, auth);
      await deps.sessions.end(caller.userId, caller.sessionId);
      await deps.events.emit(caller.appId, "session.revoked", {
        user_id: caller.userId,
        session_id: caller.sessionId,
        reason: "logout",
      });
      ctx.setHeader(HTTP_STATUS_MARKER, "204");
      return {};
    },

    async getMe(_req, ctx) {
      const caller = await authenticateCaller(ctx, auth);
      const user = await deps.users.get(caller.userId);
      if (user === undefined) throw new RingfenceError("invalid_token", "the user no longer exists");
      return {
        userId: user.userId,
        identifiers: user.identifiers,
        scopes: await deps.sessions.scopes(caller.userId, caller.sessionId),
      };
    },

    createAppWebhook,
  };
}

/** Checks a code against a challenge and turns each refusal into its error. */
export async function checked(
  deps: { redis: RedisClient; config: Config },
  key: string,
  codeHash: string,
): Promise<void> {
  const { status } = await checkCode(
    deps.redis,
    { challenge: key },
    {
      now: Date.now(),
      codeHash,
      maxChecks: deps.config.OTP_MAX_CHECKS,
    },
  );
  if (status === "valid") return;
  if (status === "invalid") throw new RingfenceError("invalid_code", "the code is not right");
  if (status === "rate_limited") {
    throw new RingfenceError("too_many_attempts", "too many wrong codes: start again");
  }
  throw new RingfenceError("expired_challenge", "unknown, used or expired challenge_token");
}

/** An identifier as callers send it, validated. */
export function readIdentifier(id: { type: string; value: string } | undefined): Identifier {
  if (id === undefined) throw badField("identifier", "is required");
  if (id.type === "phone_number") {
    const parsed = parseE164(id.value);
    if (parsed === undefined) throw badField("identifier.value", "must be an E.164 phone number");
    return { type: "phone_number", value: parsed.e164 };
  }
  if (id.type === "email_address") {
    if (!isEmailAddress(id.value)) throw badField("identifier.value", "must be an email address");
    return { type: "email_address", value: id.value };
  }
  throw badField("identifier.type", "must be phone_number or email_address");
}
