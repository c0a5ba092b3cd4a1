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
import { appOf } from "../apps/store.js";
import type { AppEvents } from "../apps/webhooks.js";
import type { StepUpChallenges, StepUpState } from "./challenges.js";
import { fail, toResponse, validateStepUpConfig } from "./config.js";
import { decide } from "./decide.js";
import type { DelegationClient } from "./delegation.js";
import type { StepUpLimits } from "./limits.js";
import {
  checkPasswordPolicy,
  hashPassword,
  PASSWORD_SCOPE,
  userOf,
  type StepUpCodes,
  type StepUpSessions,
  type StepUpUsers,
} from "./needs.js";
import { STEP_IDENTIFIER, type Decision } from "./rules.js";
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
}

/** Step-up configuration, decisions, challenge steps and the password change they unlock. */
export function stepUpHandlers(deps: StepUpDeps): Handlers<typeof StepUpServiceService> {
  const { config } = deps;

  /** Opens the challenge of step `index`, sending its code; undefined when it cannot be sent. */
  async function openStep(userId: string, state: StepUpState, call: CallScope): Promise<string | undefined> {
    const step = state.steps[state.stepIndex];
    const type = step === undefined ? undefined : STEP_IDENTIFIER[step.key];
    const user = await deps.users.get(userId);
    const identifier = user?.identifiers.find((i) => i.type === type);
    if (step === undefined || identifier === undefined) return undefined;
    await deps.limits.allowStep(state.appId, userId, state.sessionId, identifier);
    const expiresAtMs = Date.now() + step.expirationDuration * 1000;
    const challenge = await issueChallenge(deps, {
      create: (codeHash) => deps.challenges.create(userId, state, expiresAtMs, codeHash),
      send: (code) =>
        deps.codes.send(state.appId, identifier, code, "step_up", step.expirationDuration, call),
      remove: (key) => deps.challenges.remove(key),
    });
    return challenge.token;
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
      const user = await deps.users.get(caller.userId);
      const stored = await deps.configs.get(caller.appId);
      const held = new Set(user?.identifiers.map((i) => i.type) ?? []);
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
        return { status: "continue", challengeToken: "", steps: [] };
      }
      if (decision.status === "block") return { status: "block", challengeToken: "", steps: [] };

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
      const token = await openStep(caller.userId, state, ctx);
      if (token === undefined) {
        ctx.log.warn("step-up review with a step this user cannot complete: blocked", { scope: scope.data });
        return { status: "block", challengeToken: "", steps: [] };
      }
      return { status: "review", challengeToken: token, steps };
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
      await deps.codes.allowCheck({ userId: ref.userId });
      await checkChallenge(deps, ref, req.code);
      await deps.challenges.remove(ref.key);
      await convertedStep(ref.userId, state);
      const next = { ...state, stepIndex: state.stepIndex + 1 };
      const nextStep = next.steps[next.stepIndex];
      if (nextStep !== undefined) {
        const token = await openStep(ref.userId, next, ctx);
        if (token === undefined)
          throw new RingfenceError("expired_challenge", `the step ${nextStep.key} cannot be completed`);
        return { challengeToken: token, currentStep: nextStep.key };
      }
      const sessionKey = deps.sessions.keysOf(ref.userId, state.sessionId).session;
      const stepUpToken = await deps.challenges.createToken(
        ref.userId,
        sessionKey,
        state,
        config.STEP_UP_TOKEN_TTL_SECONDS * 1000,
      );
      return { challengeToken: stepUpToken, currentStep: "completed" };
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
