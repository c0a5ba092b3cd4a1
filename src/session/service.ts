import { randomUUID } from "node:crypto";
import { badField, RingfenceError } from "../errors.js";
import type { Logger } from "../log.js";
import type { Secrets } from "../crypto/secrets.js";
import type { RedisClient } from "../redis/client.js";
import type { HandlerSet } from "../rpc/binding.js";
import { noStore } from "../rpc/binding.js";
import type { SessionServiceService } from "../gen/ringfence/session/v1/session_service.js";
import type { AppStore } from "../apps/store.js";
import type { AppEvents } from "../apps/webhooks.js";
import type { SigningKeys } from "../oauth/keys/signing-keys.js";
import type { CachedKeySet } from "../oauth/keys/key-set.js";
import { checkChallenge, issueChallenge } from "../otp/challenge.js";
import { codePolicy, type OtpSettings } from "../otp/settings.js";
import { codeLoginAmr, PASSWORD_LOGIN_AMR, PASSWORD_SCOPE, readIdentifier } from "./identity.js";
import type { ChallengeStore } from "./challenges.js";
import type { CodeSender } from "./delivery.js";
import { readToken, type SessionLogin, type SessionStore } from "./sessions.js";
import { tokenSet, userOf, type TokenSet } from "./tokens.js";
import type { SessionSettings } from "./settings.js";
import type { UserStore } from "./users.js";
import { PASSWORD_LENGTH } from "./password.js";
import type { Metrics } from "../observability/metrics.js";
import { invalidCredentials, type PasswordChecker, type PasswordFailures } from "./password-login.js";
import type { KnownSources } from "./known-sources.js";
import type { OpenLogin } from "./open-login.js";

/** How long a refresh token presented again waits for its first use's answer to be kept. */
const FIRST_ANSWER_WAIT_MS = 2_000;

/**
 * The step-up tokens a refresh redeems (docs/session-api.md#step-up-challenge): step-up makes
 * them and hands this reader to the session module.
 */
export interface StepUpTokens {
  /** The owner and key of a well-formed token; undefined for anything else. */
  readToken(token: string): { userId: string; key: string } | undefined;
  /** The session and scope a token is for, while it is unused. */
  tokenOwner(key: string): Promise<{ sessionId: string; scope: string } | undefined>;
}

export interface SessionDeps {
  config: SessionSettings & OtpSettings;
  /** The token issuer (`iss`): the OAuth side names it. */
  issuer: string;
  log: Logger;
  redis: RedisClient;
  secrets: Secrets;
  apps: AppStore;
  users: UserStore;
  sessions: SessionStore;
  challenges: ChallengeStore;
  /** The tokens of completed step-ups, redeemed once by a refresh. */
  stepUpTokens: StepUpTokens;
  signingKeys: SigningKeys;
  /** The published keys, cached, to verify session tokens on every user call. */
  keySet: CachedKeySet;
  codes: CodeSender;
  events: AppEvents;
  /** Password logins: the failure windows, and the check of a password against its hash. */
  passwordFailures: PasswordFailures;
  passwords: PasswordChecker;
  /** The networks each identifier completed a login from: its windows spare them. */
  knownSources: KnownSources;
  /** Opens the session of a password login. */
  openLogin: OpenLogin;
  metrics: Pick<Metrics, "passwordLogin" | "refreshReuse">;
}

/** What sessions bring to their contract; its app operation (createAppWebhook) is src/apps/'s. */
export type SessionMethod =
  "startOtpLogin" | "checkOtpLogin" | "loginWithPassword" | "refreshSession" | "logout" | "getMe";

/** The caller-facing contract of sessions: login, refresh, logout and the caller's own account. */
export function sessionHandlers(deps: SessionDeps): HandlerSet<typeof SessionServiceService, SessionMethod> {
  const { config, issuer } = deps;
  const codeTtlSeconds = codePolicy(config).ttlSeconds;

  function tokens(
    userId: string,
    sessionId: string,
    appId: string,
    scopes: string[],
    jti: string,
    refreshToken: string,
    login: SessionLogin,
  ): Promise<TokenSet> {
    return tokenSet(deps.signingKeys, {
      issuer,
      userId,
      sessionId,
      appId,
      scopes,
      jti,
      lifetimeSeconds: config.SESSION_TOKEN_TTL_SECONDS,
      login,
      refreshToken,
    });
  }

  /**
   * The answer of a refresh token's first use, kept by that use once its tokens are made: a second
   * presentation racing the first waits for it (a few hundred milliseconds at most), then 503.
   */
  async function firstAnswer(userId: string, sessionId: string): Promise<string> {
    for (let waited = 0; waited < FIRST_ANSWER_WAIT_MS; waited += 25) {
      const kept = await deps.sessions.keptAnswer(userId, sessionId);
      if (kept !== "") return kept;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    throw new RingfenceError(
      "unavailable",
      "this refresh token's first use is still being answered; try again",
    );
  }

  return {
    async startOtpLogin(req, ctx) {
      noStore(ctx);
      const app = await deps.apps.get(req.appId);
      if (app === undefined) throw badField("app_id", "unknown app");
      const identifier = readIdentifier(req.identifier);
      const source = deps.knownSources.of(app.appId, identifier, ctx.clientAddress);
      await deps.codes.allowLogin(app.appId, identifier, source);
      const expiresAtMs = Date.now() + codeTtlSeconds * 1000;
      const challenge = await issueChallenge(deps, {
        create: (codeHash) => deps.challenges.createLogin(app.appId, identifier, expiresAtMs, codeHash),
        send: (code) => deps.codes.send(app.appId, identifier, code, "login", codeTtlSeconds, ctx),
        remove: (key) => deps.challenges.remove(key),
      });
      return { challengeToken: challenge.token, expiresAt: new Date(expiresAtMs).toISOString() };
    },

    async checkOtpLogin(req, ctx) {
      noStore(ctx);
      const ref = deps.challenges.readLogin(req.challengeToken);
      const login = ref === undefined ? undefined : await deps.challenges.loginOf(ref.key);
      if (ref === undefined || login === undefined)
        throw new RingfenceError("expired_challenge", "unknown or expired challenge_token");
      const source = deps.knownSources.of(login.appId, login.identifier, ctx.clientAddress);
      await deps.codes.allowCheck({ appId: login.appId, id: login.identifier, source });
      await checkChallenge(deps, ref, req.code);
      await deps.codes.converted(login.appId, login.identifier);
      const { user, created } = await deps.users.findOrCreate(login.appId, login.identifier);
      const jti = randomUUID();
      // The code proves the identifier, but the scope is only the app's to give: without
      // config/scopes allowing it, the login succeeds without it (the answer's scope shows that).
      const grant =
        req.grantChangePassword === true && (await deps.apps.scopes(login.appId)).includes(PASSWORD_SCOPE)
          ? {
              scope: PASSWORD_SCOPE,
              untilMs: Date.now() + config.CHANGE_PASSWORD_GRANT_SECONDS * 1000,
              mode: "single-use" as const,
            }
          : undefined;
      const [opened] = await Promise.all([
        deps.sessions.open(user.userId, login.appId, jti, { amr: codeLoginAmr(login.identifier), grant }),
        deps.knownSources.remember(source),
      ]);
      const { sessionId, refreshToken } = opened;
      await deps.challenges.remove(ref.key);
      await deps.events.emit(
        login.appId,
        "session.created",
        {
          user_id: user.userId,
          session_id: sessionId,
          new_user: created,
        },
        { call: ctx },
      );
      if (grant !== undefined) {
        await deps.events.emit(
          login.appId,
          "scope.granted",
          {
            user_id: user.userId,
            session_id: sessionId,
            scope: grant.scope,
            granted_for: config.CHANGE_PASSWORD_GRANT_SECONDS,
            grant_mode: grant.mode,
            via: "login",
          },
          { call: ctx },
        );
      }
      return tokens(
        user.userId,
        sessionId,
        login.appId,
        grant === undefined ? [] : [grant.scope],
        jti,
        refreshToken,
        opened.login,
      );
    },

    async loginWithPassword(req, ctx) {
      noStore(ctx);
      // Bad input is refused before any window is taken: it says nothing about a password.
      if (req.appId === "") throw badField("app_id", "is required");
      const identifier = readIdentifier(req.identifier);
      if (req.password === "") throw badField("password", "is required");
      if (Array.from(req.password).length > PASSWORD_LENGTH.max) {
        throw badField("password", `must be at most ${PASSWORD_LENGTH.max} characters`);
      }
      const app = await deps.apps.get(req.appId);
      if (app === undefined) throw badField("app_id", "unknown app");
      const source = deps.knownSources.of(app.appId, identifier, ctx.clientAddress);
      let attempt;
      try {
        attempt = await deps.passwordFailures.begin(app.appId, identifier, source);
      } catch (err) {
        if (err instanceof RingfenceError && err.code === "too_many_attempts") {
          deps.metrics.passwordLogin("too_many_attempts");
        }
        throw err;
      }
      const user = await deps.passwords.check(app.appId, identifier, req.password, ctx);
      if (user === undefined) {
        deps.metrics.passwordLogin("invalid_credentials");
        throw invalidCredentials();
      }
      await Promise.all([attempt.succeeded(), deps.knownSources.remember(source)]);
      const answer = await deps.openLogin(
        { userId: user.userId, appId: app.appId, amr: [...PASSWORD_LOGIN_AMR], acr: "1" },
        ctx,
      );
      deps.metrics.passwordLogin("success");
      return answer;
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
      let session: Awaited<ReturnType<SessionStore["describe"]>>;
      if (req.refreshToken !== "") {
        const parsed = readToken("rt", req.refreshToken);
        if (parsed === undefined) throw new RingfenceError("invalid_token", "malformed refresh_token");
        ({ userId, id: sessionId } = parsed);
        session = await deps.sessions.describe(userId, sessionId);
        result = await deps.sessions.refresh(userId, sessionId, { refreshHash: parsed.hash }, jti);
      } else {
        const parsed = deps.stepUpTokens.readToken(req.stepUpToken);
        const owner = parsed === undefined ? undefined : await deps.stepUpTokens.tokenOwner(parsed.key);
        if (parsed === undefined || owner === undefined) {
          throw new RingfenceError("invalid_token", "unknown, used or expired step_up_token");
        }
        ({ userId } = parsed);
        ({ sessionId, scope: stepUpScope } = owner);
        session = await deps.sessions.describe(userId, sessionId);
        result = await deps.sessions.refresh(userId, sessionId, { stepUpKey: parsed.key }, jti);
      }
      const appId = session?.appId ?? "";
      if (result.outcome === "grace") {
        // Presented again within the grace (docs/session-api.md#refresh): the first use's answer.
        deps.metrics.refreshReuse("grace");
        const sealed = result.sealed !== "" ? result.sealed : await firstAnswer(userId, sessionId);
        return JSON.parse(deps.secrets.decrypt(sealed)) as TokenSet;
      }
      if (result.outcome !== "ok" || session === undefined) {
        if (result.outcome === "reused") {
          deps.metrics.refreshReuse("revoked");
          ctx.log.warn("refresh token reused: session revoked", { user_id: userId });
          await deps.events.emit(
            appId,
            "session.revoked",
            {
              user_id: userId,
              session_id: sessionId,
              reason: "refresh_token_reused",
            },
            { call: ctx },
          );
        }
        throw new RingfenceError(
          "invalid_token",
          result.outcome === "reused"
            ? "refresh token reused: the session is revoked"
            : "unknown, used or expired token",
        );
      }
      if (stepUpScope !== undefined) {
        await deps.events.emit(
          appId,
          "scope.granted",
          {
            user_id: userId,
            session_id: sessionId,
            scope: stepUpScope,
            via: "step_up",
          },
          { call: ctx },
        );
      }
      // A redeemed step-up raised the session's acr and auth_time (docs/session-api.md#authentication-level).
      const login =
        stepUpScope === undefined
          ? session.login
          : ((await deps.sessions.describe(userId, sessionId))?.login ?? session.login);
      const answer = await tokens(userId, sessionId, appId, result.scopes, jti, result.refreshToken, login);
      if (req.refreshToken !== "") {
        // Kept sealed for a client that loses this answer and asks again within the grace.
        await deps.sessions.keepAnswer(
          userId,
          sessionId,
          result.successor,
          deps.secrets.encrypt(JSON.stringify(answer)),
        );
      }
      return answer;
    },

    async logout(_req, ctx) {
      const caller = userOf(ctx);
      await deps.sessions.end(caller.userId, caller.sessionId);
      await deps.events.emit(
        caller.appId,
        "session.revoked",
        {
          user_id: caller.userId,
          session_id: caller.sessionId,
          reason: "logout",
        },
        { call: ctx },
      );
      return {};
    },

    async getMe(_req, ctx) {
      const caller = userOf(ctx);
      const user = await deps.users.get(caller.userId);
      if (user === undefined) throw new RingfenceError("invalid_token", "the user no longer exists");
      return {
        userId: user.userId,
        identifiers: user.identifiers,
        scopes: await deps.sessions.scopes(caller.userId, caller.sessionId),
      };
    },
  };
}
