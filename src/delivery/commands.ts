/** `ringfence routes`: which providers carry each channel's messages, and how they fare (docs/routing.md). */
import { Command, Option } from "commander";
import { commaSeparated, documented, print, UsageError, type OpenStores } from "../command/command.js";
import type { SharedParts } from "../lifecycle/module.js";
import { CHANNELS, type Channel } from "../messaging/providers.js";
import { deliveryProviders } from "../messaging/settings.js";
import { deliveryInsights, INSIGHTS_GROUP_BY, parseSince, type InsightsGroupBy } from "./insights.js";
import { DeliveryKeys } from "./keys.js";
import {
  destinationKind,
  routeProblem,
  RouteStore,
  STRATEGIES,
  type Route,
  type Strategy,
} from "./routes.js";
import type { DeliverySettings } from "./settings.js";
import { DeliveryStats } from "./stats.js";

/** What the route commands use of the process: Redis, the providers' settings and the counters' life. */
export interface RouteCommandNeeds extends Pick<SharedParts, "redis" | "keys"> {
  config: Parameters<typeof deliveryProviders>[0] &
    Pick<DeliverySettings, "ROUTE_WINDOW_SECONDS" | "DELIVERY_STATS_RETENTION_DAYS">;
}

const CHANNEL_HELP = `the channel: ${CHANNELS.join(", ")}`;
const DESTINATION_HELP = "default, a country (FR), a network MCC-MNC (208-01) or a number prefix (+3361)";
const DAY_MS = 86_400_000;

/** The channel an option names, or a usage error. */
function channelOf(value: string): Channel {
  if (!(CHANNELS as readonly string[]).includes(value)) {
    throw new UsageError(`--channel must be one of ${CHANNELS.join(", ")}`);
  }
  return value as Channel;
}

/** A whole number as --weights gives it; anything else NaN, which routeProblem names. */
const weight = (s: string) => (/^\d{1,3}$/.test(s) ? Number(s) : NaN);

const routeStore = (r: RouteCommandNeeds) => new RouteStore(r.redis, new DeliveryKeys(r.keys));

function channelOption(cmd: Command): Command {
  return cmd.option("--channel <channel>", CHANNEL_HELP, "sms");
}

export function routesCommands(program: Command, open: OpenStores<RouteCommandNeeds>): void {
  const routes = documented(
    program
      .command("routes")
      .description(
        "choose the providers of each channel and destination, and read how they deliver and convert",
      )
      .addHelpText(
        "after",
        "\nEvery instance obeys a change within a second, without a restart; see docs/routing.md.",
      ),
    "Every instance obeys a change within a second, without a restart. Without a route, a channel's providers are tried in declared order (`failover`); the most specific destination wins: the longest prefix, then the network, then the country, then `default` ([routing.md](routing.md#routes)).",
  );
  routes.addCommand(setCommand(open));
  routes.addCommand(listCommand(open));
  routes.addCommand(removeCommand(open));
  routes.addCommand(insightsCommand(open));
}

function setCommand(open: OpenStores<RouteCommandNeeds>): Command {
  return documented(
    channelOption(
      new Command("set").description(
        "set the route of a destination, in place of the one it has; prints {channel, destination, providers, strategy, weights?}",
      ),
    )
      .requiredOption("--destination <destination>", DESTINATION_HELP)
      .requiredOption(
        "--providers <names>",
        "providers of DELIVERY_PROVIDERS serving the channel, comma separated, in order",
        commaSeparated((s) => s),
      )
      .option("--strategy <strategy>", STRATEGIES.join(", "), "failover")
      .option(
        "--weights <weights>",
        "with --strategy weighted: one whole number per provider, comma separated, summing to 100",
        commaSeparated(weight),
      ),
    "For example `ringfence routes set --destination FR --providers alpha,beta --strategy weighted --weights 70,30`. A provider unknown or of another channel, a malformed destination, or weights that do not match the providers or sum to 100 exit 2 and change nothing.",
  ).action(
    async (opts: {
      channel: string;
      destination: string;
      providers: string[];
      strategy: string;
      weights?: number[];
    }) => {
      const route: Route = {
        channel: opts.channel as Channel,
        destination: opts.destination,
        providers: opts.providers,
        strategy: opts.strategy as Strategy,
        ...(opts.weights === undefined ? {} : { weights: opts.weights }),
      };
      await open(async (r) => {
        const problem = routeProblem(route, deliveryProviders(r.config));
        if (problem !== undefined) throw new UsageError(problem);
        await routeStore(r).set(route);
        print(route);
      });
    },
  );
}

function listCommand(open: OpenStores<RouteCommandNeeds>): Command {
  return new Command("list")
    .description(
      "print the routes, by channel then destination: {routes: [{channel, destination, providers, strategy, weights?}]}",
    )
    .option(
      "--channel <channel>",
      `only this channel's routes: ${CHANNELS.join(", ")} (default: every channel)`,
    )
    .action(async (opts: { channel?: string }) => {
      const channel = opts.channel === undefined ? undefined : channelOf(opts.channel);
      await open(async (r) => {
        print({ routes: await routeStore(r).list(channel) });
      });
    });
}

function removeCommand(open: OpenStores<RouteCommandNeeds>): Command {
  return documented(
    channelOption(
      new Command("remove").description(
        "remove the route of a destination; prints {channel, destination, removed} (removed false: it had none)",
      ),
    ).requiredOption("--destination <destination>", DESTINATION_HELP),
    "Its messages then take the next most specific route, or the channel's providers in declared order.",
  ).action(async (opts: { channel: string; destination: string }) => {
    const channel = channelOf(opts.channel);
    if (destinationKind(opts.destination) === undefined)
      throw new UsageError(`--destination must be ${DESTINATION_HELP}`);
    await open(async (r) => {
      const removed = await routeStore(r).remove(channel, opts.destination);
      print({ channel, destination: opts.destination, removed });
    });
  });
}

function insightsCommand(open: OpenStores<RouteCommandNeeds>): Command {
  return documented(
    channelOption(
      new Command("insights").description(
        "print each provider's sends, deliveries, conversions and cost: {channel, since, until, group_by, groups: [{provider, key?, sent, accepted, delivered, undelivered, verified, delivery_rate, conversion_rate, cost}]}",
      ),
    )
      .option(
        "--since <time>",
        "an RFC 3339 time, or a duration before now: 30m, 24h, 7d (default: 24h); until is now",
      )
      .addOption(
        new Option("--group-by <kind>", "provider alone, or each provider by country or by route destination")
          .choices(INSIGHTS_GROUP_BY)
          .default("provider"),
      ),
    "`sent` counts every submit tried, `accepted` those a provider took, `undelivered` those reported undelivered or rejected; `delivery_rate` is delivered / accepted and `conversion_rate` verified / accepted (0 to 1); `cost`, in currency units, counts accepted messages not reported undelivered. Counts are kept by the hour, for `DELIVERY_STATS_RETENTION_DAYS`: the hour holding `--since` counts whole ([routing.md](routing.md#insights)).",
  ).action(async (opts: { channel: string; since?: string; groupBy: InsightsGroupBy }) => {
    const channel = channelOf(opts.channel);
    const untilMs = Date.now();
    const sinceMs = opts.since === undefined ? untilMs - DAY_MS : parseSince(opts.since, untilMs);
    if (sinceMs === undefined) {
      throw new UsageError(
        `--since: "${opts.since}" is not an RFC 3339 time or a duration such as 24h before now`,
      );
    }
    await open(async (r) => {
      const stats = new DeliveryStats(r.redis, new DeliveryKeys(r.keys), {
        windowSeconds: r.config.ROUTE_WINDOW_SECONDS,
        retentionDays: r.config.DELIVERY_STATS_RETENTION_DAYS,
      });
      // Older counters have expired: reading their hours would only cost Redis round trips.
      const oldest = untilMs - (r.config.DELIVERY_STATS_RETENTION_DAYS + 1) * DAY_MS;
      const rows = await stats.hourly(channel, Math.max(sinceMs, oldest), untilMs);
      print(deliveryInsights(rows, { channel, sinceMs, untilMs, groupBy: opts.groupBy }));
    });
  });
}
