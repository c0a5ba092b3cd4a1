import type { Module, SharedParts } from "../lifecycle/module.js";
import type { MessagingModule } from "../messaging/module.js";
import { DeliveryError, type SmsProvider } from "../messaging/provider.js";
import { parseE164 } from "../phone/e164.js";
import { describeNumber } from "../lookup/numbers.js";
import { bindService } from "../rpc/binding.js";
import { DeliveryKeys } from "./keys.js";
import { DeliveryReports, type ReportListener } from "./reports.js";
import { RingfenceError, type ErrorCode } from "../errors.js";
import { AuthFailures } from "../otp/failures.js";
import { WindowKeys } from "../otp/keys.js";
import { Router } from "./router.js";
import { RouteStore } from "./routes.js";
import type { DeliverySettings } from "./settings.js";
import { DeliveryStats } from "./stats.js";
import { DELIVERY_REPORTS, WHATSAPP_WEBHOOK } from "./surface.js";
import { WhatsAppWebhook } from "./whatsapp.js";

export interface DeliveryModule extends Module {
  router: Router;
  /** SMS as the session service sends them: routed like verification codes, without holds. */
  sms: SmsProvider;
  /**
   * Where the http providers' delivery reports and the WhatsApp providers' statuses go (verify
   * records them as receipts).
   */
  onReport(listener: ReportListener): void;
}

/** What the delivery module takes of the process (src/registry.ts gives it). */
export type DeliveryNeeds = Pick<SharedParts, "log" | "metrics" | "redis" | "keys"> & {
  config: DeliverySettings;
};

/**
 * Delivery routes (docs/routing.md): the route table and conversion figures each process keeps and
 * reads again in the background, and the circuits of the providers it sends through.
 */
export function deliveryModule(r: DeliveryNeeds, messaging: MessagingModule): DeliveryModule {
  const keys = new DeliveryKeys(r.keys);
  const router = new Router(messaging.providers, {
    store: new RouteStore(r.redis, keys),
    stats: new DeliveryStats(r.redis, keys, {
      windowSeconds: r.config.ROUTE_WINDOW_SECONDS,
      retentionDays: r.config.DELIVERY_STATS_RETENTION_DAYS,
    }),
    config: r.config,
    log: r.log,
    metrics: r.metrics,
  });
  const reports = new DeliveryReports(router);
  const whatsapp = new WhatsAppWebhook(
    router.providers.map((p) => p.spec),
    { report: (provider, receipt) => reports.report(provider, receipt), metrics: r.metrics },
  );
  return {
    name: "delivery",
    router,
    sms: routedSms(router),
    onReport: (listener) => {
      reports.onReport(listener);
    },
    bindings: [
      bindService(DELIVERY_REPORTS.definition, reports.handlers(), {
        ...DELIVERY_REPORTS.surface,
        authenticators: {
          provider: reports.authenticator(
            statusTokenFailures(r, ["unauthorized", "not_found"], "wrong delivery-report tokens"),
          ),
        },
      }),
      bindService(WHATSAPP_WEBHOOK.definition, whatsapp.handlers(), {
        ...WHATSAPP_WEBHOOK.surface,
        authenticators: whatsapp.authenticators(
          statusTokenFailures(
            r,
            ["unauthorized", "forbidden"],
            "wrong WhatsApp webhook signatures or verify tokens",
          ),
        ),
      }),
    ],
    prepare: () => router.start(),
    watched: [{ watch: (subscriber) => router.watch(subscriber, keys.routeChanges()) }],
    background: [
      {
        // The counts not yet written go to Redis, when it answers.
        close: ({ redisAnswers }) => router.stop(redisAnswers),
      },
    ],
  };
}

/** Sends through the route of each message's number, failing over as verification codes do. */
export function routedSms(router: Router): SmsProvider {
  return {
    name: "routed",
    longestSendMs: Math.max(0, ...router.providers.map((p) => p.longestSendMs)),
    async send(msg, call) {
      const phone = parseE164(msg.to);
      const facts = phone === undefined ? undefined : await describeNumber(phone);
      const network =
        facts === undefined || facts.mcc === "" || facts.mnc === "" ? "" : `${facts.mcc}-${facts.mnc}`;
      const plan = router.plan("sms", { e164: msg.to, country: phone?.countryCode ?? "", network });
      let last: unknown = new DeliveryError("no provider of the route is available", true);
      for (const p of plan.providers) {
        if (!router.take(p)) continue;
        try {
          const sent = await p.send(msg, call);
          router.submitted(p, plan, true, false);
          return sent;
        } catch (err) {
          if (!(err instanceof DeliveryError)) {
            // Nothing went out (the call was cut first): the place taken is given back.
            router.release(p);
            throw err;
          }
          router.submitted(p, plan, err, false);
          last = err;
        }
      }
      throw last;
    },
    onReceipt: () => undefined,
    close: () => Promise.resolve(),
  };
}

/**
 * Wrong provider credentials per client address, in one window (STATUS_TOKEN_FAILURES_IP): report
 * tokens and provider names, and the WhatsApp webhook's signatures and verify tokens. `wrong`: the
 * codes that say a credential was wrong; `what`: the refusal's words for them.
 */
function statusTokenFailures(r: DeliveryNeeds, wrong: readonly ErrorCode[], what: string): AuthFailures {
  const windows = new WindowKeys(r.keys);
  return new AuthFailures(r.redis, {
    setting: "STATUS_TOKEN_FAILURES_IP",
    rule: r.config.STATUS_TOKEN_FAILURES_IP,
    counter: (subject) => windows.statusTokenFailures(subject),
    isWrong: (err) => err instanceof RingfenceError && wrong.includes(err.code),
    refusal: `too many ${what} from this address; try again later`,
  });
}
