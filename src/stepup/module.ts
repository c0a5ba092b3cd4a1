import type { AppsModule } from "../apps/module.js";
import type { Module, SharedParts } from "../lifecycle/module.js";
import { bindService } from "../rpc/binding.js";
import { StepUpChallenges } from "./challenges.js";
import { DelegationClient } from "./delegation.js";
import { StepUpLimits } from "./limits.js";
import type { StepUpSessionModule } from "./needs.js";
import { stepUpHandlers } from "./service.js";
import { StepUpConfigStore } from "./store.js";
import { STEP_UP } from "./surface.js";

type HandlerDeps = Parameters<typeof stepUpHandlers>[0];

/** What the step-up module takes of the process (src/registry.ts gives it). */
export interface StepUpNeeds extends Pick<SharedParts, "log" | "redis" | "keys" | "secrets" | "outbound"> {
  config: HandlerDeps["config"];
  apps: HandlerDeps["apps"];
  users: HandlerDeps["users"];
  sessions: HandlerDeps["sessions"];
  signingKeys: ConstructorParameters<typeof DelegationClient>[0]["keys"];
}

/**
 * The step-up tokens of completed challenges, as a session refresh redeems them (the session
 * module is built before step-up's, which needs its code sender and user chain).
 */
export function stepUpTokens(r: Pick<SharedParts, "redis" | "keys">): StepUpChallenges {
  return new StepUpChallenges(r.redis, r.keys);
}

/** Step-up: each app's configuration, its decisions (direct or by the app's hook), its challenges. */
export function stepUpModule(
  r: StepUpNeeds,
  d: { apps: AppsModule; session: StepUpSessionModule; passkeys: HandlerDeps["passkeys"] },
): Module {
  const handlers = stepUpHandlers({
    config: r.config,
    log: r.log,
    redis: r.redis,
    secrets: r.secrets,
    apps: r.apps,
    users: r.users,
    sessions: r.sessions,
    challenges: new StepUpChallenges(r.redis, r.keys),
    configs: new StepUpConfigStore(r.redis, r.keys),
    limits: new StepUpLimits({ config: r.config, redis: r.redis, keys: r.keys, codes: d.session.codes }),
    codes: d.session.codes,
    delegation: new DelegationClient({ keys: r.signingKeys, logger: r.log, fetch: r.outbound.fetch }),
    outbound: r.outbound,
    events: d.apps.events,
    passkeys: d.passkeys,
  });
  return {
    name: "stepup",
    bindings: [
      bindService(STEP_UP.definition, handlers, {
        ...STEP_UP.surface,
        authenticators: { session: d.session.authenticate, app: d.apps.authenticate },
      }),
    ],
  };
}
