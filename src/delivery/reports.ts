import { createHash, timingSafeEqual } from "node:crypto";
import { z } from "zod";
import { badInput, RingfenceError } from "../errors.js";
import type { DeliveryReportServiceService } from "../gen/ringfence/delivery/v1/delivery_report_service.js";
import type { DeliveryReceipt, DeliveryState } from "../messaging/provider.js";
import type { DeliveryProvider, ProviderSpec } from "../messaging/providers.js";
import {
  callerOf,
  keyed,
  type CallContext,
  type CallerAuthenticator,
  type HandlerSet,
} from "../rpc/binding.js";
import { callerKey } from "../rpc/callers.js";
import type { AuthFailures } from "../otp/failures.js";

/** Where a delivery report goes once taken: `provider`'s receipt of the message it names. */
export type ReportListener = (provider: string, receipt: DeliveryReceipt) => Promise<void>;

/** The key a reporting provider is found under on the call context: logged by its name. */
export const PROVIDER_CALLER = callerKey<ProviderSpec>("provider", (p) => `provider:${p.name}`);

/** Each status a report may give, as the state of its receipt (docs/routing.md#delivery-reports). */
const STATES = {
  delivered: "delivered",
  undelivered: "failed",
  rejected: "rejected",
} as const satisfies Record<string, DeliveryState>;

const STATUSES = Object.keys(STATES) as [keyof typeof STATES, ...(keyof typeof STATES)[]];

const Report = z.object({
  reference: z.string().min(1, "is required").max(128, "must be at most 128 characters"),
  status: z.enum(STATUSES, { error: `must be one of ${STATUSES.map((s) => `"${s}"`).join(", ")}` }),
  error: z.string().max(64, "must be at most 64 characters").optional(),
});

const CHALLENGE = { "www-authenticate": 'Bearer realm="ringfence"' };

/**
 * The delivery reports of http providers (docs/routing.md#delivery-reports): each provider
 * authenticates with its own `status_token`, and each report becomes a receipt handed to the
 * listeners (verify records it as SMPP receipts are recorded).
 */
export class DeliveryReports {
  private readonly listeners: ReportListener[] = [];

  constructor(
    private readonly providers: { provider(name: string): DeliveryProvider | undefined },
    private readonly now: () => number = Date.now,
  ) {}

  /** Adds where reports go; every listener hears each report, and a report is answered once all have it. */
  onReport(listener: ReportListener): void {
    this.listeners.push(listener);
  }

  /** Hands `provider`'s receipt to every listener (a WhatsApp status too); resolves once all have it. */
  async report(provider: string, receipt: DeliveryReceipt): Promise<void> {
    await Promise.all(this.listeners.map((listener) => listener(provider, receipt)));
  }

  /**
   * The caller of a report: the provider the path names, when the bearer token is its
   * `status_token`; wrong tokens and names are counted per client address by `failures`.
   */
  authenticator(failures: Pick<AuthFailures, "guard">): CallerAuthenticator<ProviderSpec> {
    return keyed(
      PROVIDER_CALLER,
      failures.guard((ctx, request) => this.authenticate(ctx, request)),
    );
  }

  handlers(): HandlerSet<typeof DeliveryReportServiceService, "reportDeliveryStatus"> {
    return {
      reportDeliveryStatus: async (req, ctx) => {
        const provider = callerOf(ctx, PROVIDER_CALLER);
        const parsed = Report.safeParse({ reference: req.reference, status: req.status, error: req.error });
        if (!parsed.success) throw badInput(parsed.error);
        const { reference, status, error } = parsed.data;
        // For an http provider the message id kept for its receipts is our reference.
        const receipt: DeliveryReceipt = {
          providerId: reference,
          state: STATES[status],
          providerStatus: status.toUpperCase(),
          ...(error === undefined || error === "" ? {} : { errorCode: error }),
          at: new Date(this.now()).toISOString(),
        };
        await this.report(provider.name, receipt);
        return {};
      },
    };
  }

  private authenticate(ctx: CallContext, request: unknown): ProviderSpec {
    const name = (request as { provider?: unknown } | null)?.provider;
    const spec = typeof name === "string" ? this.providers.provider(name)?.spec : undefined;
    // Only http providers (sms or voice) with a status token take reports (SMPP receipts come on
    // the bind, WhatsApp statuses on its webhook).
    if (spec?.kind !== "http" || spec.statusToken === undefined) {
      throw new RingfenceError("not_found", "no provider of this name takes delivery reports");
    }
    const match = /^Bearer\s+(\S+)\s*$/i.exec(ctx.header("authorization") ?? "");
    if (match?.[1] === undefined) {
      throw new RingfenceError("unauthorized", "Authorization: Bearer <status_token> is required", CHALLENGE);
    }
    if (!sameToken(match[1], spec.statusToken)) {
      throw new RingfenceError("unauthorized", "the token is not this provider's status_token", CHALLENGE);
    }
    return spec;
  }
}

/** Compares in constant time, whatever the lengths (both are hashed first). */
export function sameToken(given: string, expected: string): boolean {
  const digest = (s: string) => createHash("sha256").update(s, "utf8").digest();
  return timingSafeEqual(digest(given), digest(expected));
}
