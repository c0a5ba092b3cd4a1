import { randomBytes } from "node:crypto";
import { badField, RingfenceError } from "../errors.js";
import type { CallScope } from "../observability/calls.js";
import type { Logger } from "../log.js";
import type { OutboundGuard } from "../net/outbound.js";
import type { RedisClient } from "../redis/client.js";
import type { Secrets } from "../crypto/secrets.js";
import type { Handlers } from "../rpc/binding.js";
import { noStore } from "../rpc/binding.js";
import type { StepUpServiceService } from "../gen/ringfence/stepup/v1/stepup_service.js";
import type { AppStore } from "../apps/store.js";
import { SCOPE } from "../apps/app.js";
import { checkChallenge, issueChallenge } from "../otp/challenge.js";
import { codePolicy } from "../otp/settings.js";
import { appOf } from "../apps/store.js";
import type { AppEvents } from "../apps/webhooks.js";
import type { StepUpChallenges, StepUpState } from "./challenges.js";
import { fail, toResponse, validateStepUpConfig } from "./config.js";
import { decide, type Holdings } from "./decide.js";
import type { DelegationClient } from "./delegation.js";
import type { StepUpLimits } from "./limits.js";
import {
  checkPasswordPolicy,
  hashPassword,
  PASSWORD_SCOPE,
  userOf,
  type StepUpCodes,
  type StepUpPasskeys,
  type StepUpSessions,
  type StepUpUsers,
} from "./needs.js";
import { PASSKEY_STEP, STEP_IDENTIFIER, type Decision } from "./rules.js";
import { needsAuthentication, readAuthRequest, reauthenticationSteps } from "./reauthentication.js";
import type { OtpSettings } from "../otp/settings.js";
import type { StepUpSettings } from "./settings.js";
import type { StepUpConfigStore } from "./store.js";

export interface StepUpDeps {
  config: StepUpSettings & OtpSettings;
  log: Logger;
  redis: RedisClient;
  secrets: Secrets;
  apps: AppStore;
  users: StepUpUsers;
  sessions: StepUpSessions;
  challenges: StepUpChallenges;
  /** Each app's configuration. */
  configs: StepUpConfigStore;
  limits: StepUpLimits;
  codes: StepUpCodes;
  delegation: DelegationClient;
  /** Checks jwks_url and hook URLs: no private or reserved address (OUTBOUND_ALLOWED_CIDRS). */
  outbound: Pick<OutboundGuard, "refusal">;
  events: AppEvents;
  /** Passkeys, for `verify_passkey` steps. */
  passkeys: StepUpPasskeys;
}

/** A step opened: its challenge token, and a passkey step's request options. */
interface OpenedStep {
  token: string;
  passkeyOptions?: Record<string, unknown>;
}

/** Step-up configuration, decisions, challenge steps and the password change they unlock. */
export function stepUpHandlers(deps: StepUpDeps): Handlers<typeof StepUpServiceService> {
  const { config } = deps;
  const codeTtlSeconds = codePolicy(config).ttlSeconds;

  /**
   * Opens the challenge of step `index`: sends its code, or for `verify_passkey` keeps a WebAuthn
   * challenge and answers its request options; undefined when the user cannot complete it.
   */
  async function openStep(
    userId: string,
    state: StepUpState,
    call: CallScope,
  ): Promise<OpenedStep | undefined> {
    const step = state.steps[state.stepIndex];
    if (step === undefined) return undefined;
    const expiresAtMs = Date.now() + step.expirationDuration * 1000;
    if (step.key === PASSKEY_STEP) {
      const passkey = await deps.passkeys.stepOptions(state.appId, userId);
      if (passkey === undefined) return undefined;
      await deps.limits.allowPasskeyStep(userId, state.sessionId);
      // No code completes this step: the hash is of nothing anyone holds.
      const unusable = randomBytes(32).toString("hex");
      const { token } = await deps.challenges.create(
        userId,
        state,
        expiresAtMs,
        () => unusable,
        passkey.challenge,
      );
      return { token, passkeyOptions: passkey.options };
    }
    const type = STEP_IDENTIFIER[step.key];
    const user = await deps.users.get(userId);
    const identifier = user?.identifiers.find((i) => i.type === type);
    if (identifier === undefined) return undefined;
    await deps.limits.allowStep(state.appId, userId, state.sessionId, identifier);
    const challenge = await issueChallenge(deps, {
      create: (codeHash) => deps.challenges.create(userId, state, expiresAtMs, codeHash),
      send: (code) =>
        deps.codes.send(state.appId, identifier, code, "step_up", step.expirationDuration, call),
      remove: (key) => deps.challenges.remove(key),
    });
    return { token: challenge.token };
  }

  /**
   * The step after a completed one: its challenge, or once none is left the step-up token
   * redeemed at /v1/session/refresh.
   */
  async function advance(userId: string, state: StepUpState, call: CallScope) {
    const next = { ...state, stepIndex: state.stepIndex + 1 };
    const nextStep = next.steps[next.stepIndex];
    if (nextStep !== undefined) {
      const opened = await openStep(userId, next, call);
      if (opened === undefined)
        throw new RingfenceError("expired_challenge", `the step ${nextStep.key} cannot be completed`);
      return {
        challengeToken: opened.token,
        currentStep: nextStep.key,
        passkeyOptions: opened.passkeyOptions,
      };
    }
    const sessionKey = deps.sessions.keysOf(userId, state.sessionId).session;
    const stepUpToken = await deps.challenges.createToken(
      userId,
      sessionKey,
      state,
      config.STEP_UP_TOKEN_TTL_SECONDS * 1000,
    );
    return { challengeToken: stepUpToken, currentStep: "completed", passkeyOptions: undefined };
  }

  /** A step's right code: an SMS step's conversion counts for the fraud engine (docs/fraud.md). */
  async function convertedStep(userId: string, state: StepUpState): Promise<void> {
    const step = state.steps[state.stepIndex];
    if (step === undefined || STEP_IDENTIFIER[step.key] !== "phone_number") return;
    const identifier = (await deps.users.get(userId))?.identifiers.find((i) => i.type === "phone_number");
    if (identifier !== undefined) await deps.codes.converted(state.appId, identifier);
  }

  return {
    async createStepUpConfig(req, ctx) {
      const app = appOf(ctx);
      const validated = validateStepUpConfig(req, await deps.apps.scopes(app.appId));
      const urls: [string, string][] = validated.entries.flatMap((e, i): [string, string][] =>
        e.mode === "delegated" ? [[`allowed_scopes[${i}].delegated.url`, e.url]] : [],
      );
      if (validated.jwksUrl !== "") urls.unshift(["jwks_url", validated.jwksUrl]);
      for (const [field, url] of urls) {
        const refusal = await deps.outbound.refusal(url);
        if (refusal !== undefined) fail(field, refusal);
      }
      await deps.configs.put(app.appId, validated);
      return toResponse(app.appId, validated);
    },

    async requestStepUp(req, ctx) {
      noStore(ctx);
      const caller = userOf(ctx);
      const scope = SCOPE.safeParse(req.scope);
      if (!scope.success) throw badField("scope", scope.error.issues[0]?.message ?? "is invalid");
      if (!(await deps.apps.scopes(caller.appId)).includes(scope.data)) {
        throw new RingfenceError("scope_not_allowed", `the app does not allow the scope ${scope.data}`);
      }
      const wanted = readAuthRequest(req);
      const [user, stored, passkey, session] = await Promise.all([
        deps.users.get(caller.userId),
        deps.configs.get(caller.appId),
        deps.passkeys.holdsAny(caller.userId),
        wanted === undefined ? undefined : deps.sessions.describe(caller.userId, caller.sessionId),
      ]);
      const held: Holdings = {
        identifierTypes: new Set(user?.identifiers.map((i) => i.type) ?? []),
        passkey,
      };
      const resolution =
        stored === undefined ? ({ kind: "none" } as const) : decide(stored, scope.data, held);
      let decision: Decision;
      if (resolution.kind === "direct") decision = resolution.entry;
      else if (resolution.kind === "delegated" && stored !== undefined) {
        await deps.limits.allowHookCall(caller.userId, caller.sessionId);
        decision = await deps.delegation.decide(resolution.entry, stored.jwksUrl, {
          scope_requested: scope.data,
          user_id: caller.userId,
          identifiers: user?.identifiers ?? [],
          signals: { session_id: caller.sessionId },
          metadata: req.metadata ?? {},
        });
      } else decision = { status: "block", grantedFor: 0, grantMode: "single-use", steps: [] };

      // RFC 9470: a session below the level asked, or authenticated too long ago, is challenged.
      if (
        decision.status === "continue" &&
        wanted !== undefined &&
        needsAuthentication(wanted, session?.login)
      ) {
        const steps = reauthenticationSteps(stored, scope.data, held, codeTtlSeconds);
        decision =
          steps.length === 0
            ? { ...decision, status: "block", steps: [] }
            : { ...decision, status: "review", steps };
      }

      if (decision.status === "continue") {
        const until = Date.now() + decision.grantedFor * 1000;
        await deps.sessions.grant(caller.userId, caller.sessionId, {
          scope: scope.data,
          untilMs: until,
          mode: decision.grantMode,
        });
        await deps.events.emit(
          caller.appId,
          "scope.granted",
          {
            user_id: caller.userId,
            session_id: caller.sessionId,
            scope: scope.data,
            granted_for: decision.grantedFor,
            grant_mode: decision.grantMode,
            via: "step_up",
          },
          { call: ctx },
        );
        return { status: "continue", challengeToken: "", steps: [], passkeyOptions: undefined };
      }
      if (decision.status === "block") {
        return { status: "block", challengeToken: "", steps: [], passkeyOptions: undefined };
      }

      const steps = [...decision.steps].sort((a, b) => a.order - b.order);
      const state: StepUpState = {
        sessionId: caller.sessionId,
        appId: caller.appId,
        scope: scope.data,
        grantedFor: decision.grantedFor,
        grantMode: decision.grantMode,
        steps,
        stepIndex: 0,
      };
      const opened = await openStep(caller.userId, state, ctx);
      if (opened === undefined) {
        ctx.log.warn("step-up review with a step this user cannot complete: blocked", { scope: scope.data });
        return { status: "block", challengeToken: "", steps: [], passkeyOptions: undefined };
      }
      return { status: "review", challengeToken: opened.token, steps, passkeyOptions: opened.passkeyOptions };
    },

    async checkStepUpOtp(req, ctx) {
      noStore(ctx);
      const ref = deps.challenges.read(req.challengeToken);
      const state = ref === undefined ? undefined : await deps.challenges.stateOf(ref.key);
      if (ref === undefined || state === undefined) {
        throw new RingfenceError("expired_challenge", "unknown, used or expired challenge_token");
      }
      if (!(await deps.sessions.alive(ref.userId, state.sessionId))) {
        throw new RingfenceError("invalid_token", "the session has ended");
      }
      if (state.steps[state.stepIndex]?.key === PASSKEY_STEP) {
        throw badField(
          "challenge_token",
          "the current step is verify_passkey: answer it at /v1/session/passkey/check",
        );
      }
      await deps.codes.allowCheck({ userId: ref.userId });
      await checkChallenge(deps, ref, req.code);
      await deps.challenges.remove(ref.key);
      await convertedStep(ref.userId, state);
      return advance(ref.userId, state, ctx);
    },

    async checkStepUpPasskey(req, ctx) {
      noStore(ctx);
      if (req.challengeToken === "") throw badField("challenge_token", "is required");
      const response = deps.passkeys.read(req.credential);
      const ref = deps.challenges.read(req.challengeToken);
      // Taken by this attempt whatever comes of it: a challenge answers one attempt.
      const taken = ref === undefined ? undefined : await deps.challenges.take(ref.key);
      if (ref === undefined || taken === undefined) {
        throw new RingfenceError(
          "expired_challenge",
          "unknown, used or expired challenge_token, or not a verify_passkey step",
        );
      }
      const { state } = taken;
      if (!(await deps.sessions.alive(ref.userId, state.sessionId))) {
        throw new RingfenceError("invalid_token", "the session has ended");
      }
      await deps.passkeys.assert(
        "step_up",
        {
          appId: state.appId,
          challenge: taken.passkeyChallenge,
          // Taken already, by this attempt.
          consume: () => Promise.resolve(true),
          expiresAtMs: taken.expiresAtMs,
        },
        response,
        ctx,
        ref.userId,
      );
      return advance(ref.userId, state, ctx);
    },

    async resetPassword(req, ctx) {
      const caller = userOf(ctx);
      const problem = checkPasswordPolicy(req.password);
      if (problem !== undefined) throw badField("password", problem);
      const insufficient = () =>
        new RingfenceError("insufficient_scope", `the session needs the ${PASSWORD_SCOPE} scope`, {
          "www-authenticate": `Bearer realm="ringfence", error="insufficient_scope", scope="${PASSWORD_SCOPE}"`,
        });
      // A cheap look first, so that only callers holding the scope cost an argon2id hash.
      if (!(await deps.sessions.scopes(caller.userId, caller.sessionId)).includes(PASSWORD_SCOPE))
        throw insufficient();
      const passwordHash = await hashPassword(req.password);
      // Every other session of the user ends with the change: a stolen one does not survive it.
      const reset = await deps.sessions.resetPassword(caller.userId, caller.sessionId, {
        scope: PASSWORD_SCOPE,
        jti: caller.jti,
        passwordHash,
      });
      if (reset.outcome !== "ok") {
        throw reset.outcome === "no_session"
          ? new RingfenceError("invalid_token", "the session has ended")
          : insufficient();
      }
      const who = { user_id: caller.userId, session_id: caller.sessionId };
      await deps.events.emit(
        caller.appId,
        "scope.consumed",
        { ...who, scope: PASSWORD_SCOPE },
        { call: ctx },
      );
      await deps.events.emit(caller.appId, "password.changed", who, { call: ctx });
      for (const ended of reset.ended) {
        await deps.events.emit(
          caller.appId,
          "session.revoked",
          {
            user_id: caller.userId,
            session_id: ended,
            reason: "password_changed",
          },
          { call: ctx },
        );
      }
      return {};
    },
  };
}
