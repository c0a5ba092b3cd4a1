import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import {
  createFileRegistry,
  fromBinary,
  fromJson,
  getOption,
  hasOption,
  toJson,
  type DescMessage,
  type FileRegistry,
  type JsonValue,
  type Message,
} from "@bufbuild/protobuf";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { expect } from "chai";
import { parse } from "yaml";
import { ERRORS, V2_ERROR_CODES, V2_ERROR_TYPES } from "../src/errors.js";
import { SERVICES } from "../src/surfaces.js";

/**
 * envoy/envoy.yaml checked without an Envoy binary: against Envoy's own API protos (shipped by
 * @grpc/grpc-js-xds), which reject unknown fields, wrong types and unknown `@type` values, and
 * against our descriptor and docker-compose.yml for what the protos cannot know.
 */

const REPO = fileURLToPath(new URL("..", import.meta.url));
const ENVOY_YAML = join(REPO, "envoy", "envoy.yaml");
const DESCRIPTOR = join(REPO, "envoy", "descriptor.binpb");
const COMPOSE = join(REPO, "docker-compose.yml");
const BUF = join(REPO, "node_modules", ".bin", "buf");
const XDS_DEPS = join(REPO, "node_modules", "@grpc", "grpc-js-xds", "deps");
const PROTO_ROOTS = ["envoy-api", "xds", "googleapis", "protoc-gen-validate"].map((d) => join(XDS_DEPS, d));

/** Every message envoy.yaml uses, directly or as a typed_config; imports follow. */
const ENVOY_PROTOS = [
  "envoy/config/bootstrap/v3/bootstrap.proto",
  "envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager.proto",
  "envoy/extensions/filters/http/grpc_json_transcoder/v3/transcoder.proto",
  "envoy/extensions/filters/http/lua/v3/lua.proto",
  "envoy/extensions/filters/http/router/v3/router.proto",
  "envoy/extensions/upstreams/http/v3/http_protocol_options.proto",
  "envoy/extensions/access_loggers/stream/v3/stream.proto",
];

const TYPE = "type.googleapis.com/";
const HCM_TYPE = `${TYPE}envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager`;
const LUA_TYPE = `${TYPE}envoy.extensions.filters.http.lua.v3.Lua`;
const TRANSCODER_TYPE = `${TYPE}envoy.extensions.filters.http.grpc_json_transcoder.v3.GrpcJsonTranscoder`;
const ROUTER_TYPE = `${TYPE}envoy.extensions.filters.http.router.v3.Router`;
const HTTP_OPTIONS_KEY = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions";

// Shapes of the parts of a bootstrap this test reads, with proto field names (as in the YAML).
interface TypedConfig {
  "@type": string;
  [field: string]: unknown;
}
interface NamedTyped {
  name: string;
  typed_config: TypedConfig;
}
interface SocketAddress {
  address: string;
  port_value: number;
}
interface RouteEntry {
  match: { prefix?: string; path?: string };
  route?: { cluster?: string; timeout?: string };
}
interface Hcm extends TypedConfig {
  route_config: { virtual_hosts: { domains: string[]; routes: RouteEntry[] }[] };
  http_filters: NamedTyped[];
}
interface Cluster {
  name: string;
  load_assignment: {
    endpoints: { lb_endpoints: { endpoint: { address: { socket_address: SocketAddress } } }[] }[];
  };
  typed_extension_protocol_options?: Record<string, TypedConfig>;
  health_checks?: { grpc_health_check?: object }[];
}
interface Bootstrap {
  static_resources: {
    listeners: { address: { socket_address: SocketAddress }; filter_chains: { filters: NamedTyped[] }[] }[];
    clusters: Cluster[];
  };
}
interface Transcoder extends TypedConfig {
  proto_descriptor: string;
  services: string[];
  print_options: Record<string, boolean>;
  request_validation_options: Record<string, boolean>;
  convert_grpc_status: boolean;
  auto_mapping: boolean;
}

function hcmOf(config: Bootstrap): Hcm {
  const filters = config.static_resources.listeners.flatMap((l) => l.filter_chains.flatMap((c) => c.filters));
  const hcm = filters.find((f) => f.typed_config["@type"] === HCM_TYPE);
  expect(hcm, "an http_connection_manager").to.not.equal(undefined);
  return hcm!.typed_config as Hcm;
}

function httpFilter(config: Bootstrap, type: string): TypedConfig {
  const filter = hcmOf(config).http_filters.find((f) => f.typed_config["@type"] === type);
  expect(filter, type).to.not.equal(undefined);
  return filter!.typed_config;
}

const transcoderOf = (config: Bootstrap) => httpFilter(config, TRANSCODER_TYPE) as Transcoder;

function luaSource(config: Bootstrap): string {
  const lua = httpFilter(config, LUA_TYPE);
  const code = (lua.default_source_code as { inline_string?: string } | undefined)?.inline_string;
  const source = code ?? lua.inline_code;
  expect(source, "inline Lua code").to.be.a("string");
  return source as string;
}

/** Copies `roots` and everything they import from the xds deps into `dir` (google/protobuf comes with buf). */
function copyProtoClosure(roots: readonly string[], dir: string): void {
  const queue = [...roots];
  const seen = new Set<string>();
  for (let file = queue.pop(); file !== undefined; file = queue.pop()) {
    if (seen.has(file)) continue;
    seen.add(file);
    const from = PROTO_ROOTS.map((root) => join(root, file)).find((path) => existsSync(path));
    if (from === undefined) {
      if (file.startsWith("google/protobuf/")) continue;
      throw new Error(`${file} is not in ${XDS_DEPS}`);
    }
    const text = readFileSync(from, "utf8");
    mkdirSync(dirname(join(dir, file)), { recursive: true });
    writeFileSync(join(dir, file), text);
    for (const m of text.matchAll(/^\s*import\s+(?:public\s+|weak\s+)?"([^"]+)"\s*;/gm)) queue.push(m[1]!);
  }
}

/** The bundled validate.proto predates `StringRules.ignore_empty`, which the Envoy protos use. */
function patchValidateProto(dir: string): void {
  const path = join(dir, "validate", "validate.proto");
  const text = readFileSync(path, "utf8");
  const start = text.indexOf("message StringRules {");
  if (start < 0) throw new Error("validate.proto has no StringRules");
  let depth = 0;
  let end = start;
  for (; end < text.length; end++) {
    if (text[end] === "{") depth++;
    else if (text[end] === "}" && --depth === 0) break;
  }
  if (/\bignore_empty\b/.test(text.slice(start, end))) return;
  writeFileSync(path, `${text.slice(0, end)}  optional bool ignore_empty = 26;\n${text.slice(end)}`);
}

function bufBuild(input: string, output: string, cwd: string): FileRegistry {
  execFileSync(BUF, ["build", input, "--as-file-descriptor-set", "-o", output], { cwd, stdio: "pipe" });
  return createFileRegistry(fromBinary(FileDescriptorSetSchema, readFileSync(output)));
}

interface HttpRuleJson {
  get?: string;
  put?: string;
  post?: string;
  delete?: string;
  patch?: string;
  custom?: { path?: string };
  additional_bindings?: HttpRuleJson[];
}

interface RpcPaths {
  grpcPath: string;
  /** Path templates of the method's google.api.http rule and its additional bindings. */
  httpPaths: string[];
}

/** Services of our own packages (fully qualified names), with the paths of their methods. */
function ringfenceServices(registry: FileRegistry): Map<string, RpcPaths[]> {
  const httpOption = registry.getExtension("google.api.http");
  const httpRuleDesc = registry.getMessage("google.api.HttpRule");
  const services = new Map<string, RpcPaths[]>();
  for (const file of registry.files) {
    if (!file.proto.package.startsWith("ringfence.")) continue;
    for (const service of file.services) {
      const methods = service.methods.map((method) => {
        const httpPaths: string[] = [];
        if (httpOption !== undefined && httpRuleDesc !== undefined && hasOption(method, httpOption)) {
          const rule = toJson(httpRuleDesc, getOption(method, httpOption) as Message, {
            useProtoFieldName: true,
          }) as HttpRuleJson;
          for (const r of [rule, ...(rule.additional_bindings ?? [])]) {
            const pattern = r.get ?? r.put ?? r.post ?? r.delete ?? r.patch ?? r.custom?.path;
            if (pattern !== undefined) httpPaths.push(pattern);
          }
        }
        return { grpcPath: `/${service.typeName}/${method.name}`, httpPaths };
      });
      services.set(service.typeName, methods);
    }
  }
  return services;
}

/** A concrete path for a google.api.http template: each variable or wildcard becomes one segment. */
function samplePath(template: string): string {
  return template.replace(/\{[^}]*\}/g, "x").replace(/\*\*?/g, "x");
}

/** Envoy's first matching route of the catch-all virtual host (prefix and exact path matches only). */
function routeFor(config: Bootstrap, path: string): RouteEntry | undefined {
  const host = hcmOf(config).route_config.virtual_hosts.find((h) => h.domains.includes("*"));
  return host?.routes.find(
    (r) => (r.match.prefix !== undefined && path.startsWith(r.match.prefix)) || r.match.path === path,
  );
}

interface ComposeService {
  image?: string;
  environment?: Record<string, string | number> | string[];
  volumes?: (string | { type?: string; source?: string; target?: string })[];
}

function composeServices(): Record<string, ComposeService> {
  const compose = parse(readFileSync(COMPOSE, "utf8")) as { services?: Record<string, ComposeService> };
  expect(compose.services, "docker-compose.yml services").to.be.an("object");
  return compose.services!;
}

function mounts(service: ComposeService): { source: string; target: string }[] {
  return (service.volumes ?? []).map((v) => {
    if (typeof v !== "string") return { source: v.source ?? "", target: v.target ?? "" };
    const [source = "", target = ""] = v.split(":");
    return { source, target };
  });
}

function environment(service: ComposeService): Record<string, string> {
  const env = service.environment ?? {};
  if (Array.isArray(env)) {
    return Object.fromEntries(env.map((e) => [e.slice(0, e.indexOf("=")), e.slice(e.indexOf("=") + 1)]));
  }
  return Object.fromEntries(Object.entries(env).map(([k, v]) => [k, String(v)]));
}

describe("envoy/envoy.yaml", function () {
  let workDir: string;
  let envoyRegistry: FileRegistry;
  let bootstrapDesc: DescMessage;
  let raw: JsonValue;
  /** The validated bootstrap written back as JSON: proto field names, defaults included. */
  let config: Bootstrap;
  let descriptor: FileRegistry;

  const validate = (json: JsonValue) =>
    fromJson(bootstrapDesc, json, { registry: envoyRegistry, ignoreUnknownFields: false });

  before(function () {
    this.timeout(120_000);
    workDir = mkdtempSync(join(tmpdir(), "ringfence-envoy-"));
    const protoDir = join(workDir, "protos");
    copyProtoClosure(ENVOY_PROTOS, protoDir);
    patchValidateProto(protoDir);
    writeFileSync(join(protoDir, "buf.yaml"), "version: v2\n");
    envoyRegistry = bufBuild(".", join(workDir, "envoy-api.binpb"), protoDir);
    const desc = envoyRegistry.getMessage("envoy.config.bootstrap.v3.Bootstrap");
    if (desc === undefined) throw new Error("envoy.config.bootstrap.v3.Bootstrap is not in the Envoy protos");
    bootstrapDesc = desc;

    raw = parse(readFileSync(ENVOY_YAML, "utf8")) as JsonValue;
    config = toJson(bootstrapDesc, validate(raw), {
      registry: envoyRegistry,
      useProtoFieldName: true,
      alwaysEmitImplicit: true,
    }) as unknown as Bootstrap;

    if (!existsSync(DESCRIPTOR)) throw new Error(`${DESCRIPTOR} is missing: run npm run generate`);
    descriptor = createFileRegistry(fromBinary(FileDescriptorSetSchema, readFileSync(DESCRIPTOR)));
  });

  after(function () {
    if (workDir) rmSync(workDir, { recursive: true, force: true });
  });

  it("is a valid Envoy v3 Bootstrap", function () {
    expect(() => validate(raw)).to.not.throw();
    const addresses = config.static_resources.listeners.map((l) => l.address.socket_address);
    expect(addresses).to.deep.include({ ...addresses[0], address: "0.0.0.0", port_value: 8080 });
  });

  it("rejects a misspelled field", function () {
    const copy = structuredClone(raw) as unknown as Bootstrap;
    const options = transcoderOf(copy).print_options;
    options.preserve_proto_field_name = options.preserve_proto_field_names!;
    delete options.preserve_proto_field_names;
    expect(() => validate(copy as unknown as JsonValue)).to.throw(
      /key "preserve_proto_field_name" is unknown/,
    );
  });

  it("rejects a wrong type", function () {
    const copy = structuredClone(raw) as unknown as Bootstrap;
    (copy.static_resources.listeners[0]!.address.socket_address as { port_value: unknown }).port_value =
      "abc";
    expect(() => validate(copy as unknown as JsonValue)).to.throw(/port_value.*"abc"/);
  });

  it("rejects an unknown typed_config type", function () {
    const copy = structuredClone(raw) as unknown as Bootstrap;
    transcoderOf(copy)["@type"] = `${TRANSCODER_TYPE}Typo`;
    expect(() => validate(copy as unknown as JsonValue)).to.throw(
      /GrpcJsonTranscoderTypo is not in the type registry/,
    );
  });

  it("reads a descriptor built from the current proto/ files (else run npm run generate)", function () {
    const fresh = bufBuild("proto", join(workDir, "ringfence.binpb"), REPO);
    const methods = (r: FileRegistry) =>
      [...ringfenceServices(r)].flatMap(([name, ms]) => [name, ...ms.map((m) => m.grpcPath)]).sort();
    expect(methods(descriptor)).to.deep.equal(methods(fresh));
  });

  it("lists every service of the descriptor in the transcoder", function () {
    const services = [...ringfenceServices(descriptor).keys()];
    expect(services).to.not.be.empty;
    expect([...transcoderOf(config).services].sort()).to.deep.equal(services.sort());
  });

  it("routes every service to the gRPC cluster", function () {
    const services = ringfenceServices(descriptor);
    const paths = [...services.values()].flat().flatMap((m) => [m.grpcPath, ...m.httpPaths.map(samplePath)]);
    expect(paths, "methods in the descriptor").to.not.be.empty;
    for (const path of paths) {
      const route = routeFor(config, path);
      expect(route, `a route for ${path}`).to.not.equal(undefined);
      const clusterName = route!.route?.cluster;
      const cluster = config.static_resources.clusters.find((c) => c.name === clusterName);
      expect(cluster, `cluster ${String(clusterName)} for ${path}`).to.not.equal(undefined);
      const http = cluster!.typed_extension_protocol_options?.[HTTP_OPTIONS_KEY] as
        { explicit_http_config?: { http2_protocol_options?: object } } | undefined;
      expect(http?.explicit_http_config?.http2_protocol_options, `${cluster!.name} speaks HTTP/2`).to.be.an(
        "object",
      );
      expect(
        cluster!.health_checks?.some((h) => h.grpc_health_check !== undefined),
        "gRPC health checks",
      ).to.be.true;
    }
  });

  it("targets the gRPC port of the ringfence service in docker-compose", function () {
    const services = composeServices();
    for (const cluster of config.static_resources.clusters) {
      for (const { lb_endpoints } of cluster.load_assignment.endpoints) {
        for (const { endpoint } of lb_endpoints) {
          const { address, port_value } = endpoint.address.socket_address;
          const service = services[address];
          expect(service, `compose service ${address}`).to.not.equal(undefined);
          const env = environment(service!);
          expect(env.GRPC_PORT ?? "50051", `${address} GRPC_PORT`).to.equal(String(port_value));
          expect(env.HOST, `${address} HOST`).to.equal("0.0.0.0");
        }
      }
    }
  });

  it("puts the Lua marker filter before the transcoder and the router last", function () {
    const types = hcmOf(config).http_filters.map((f) => f.typed_config["@type"]);
    expect(types).to.include(LUA_TYPE).and.to.include(TRANSCODER_TYPE);
    expect(types.indexOf(LUA_TYPE)).to.be.lessThan(types.indexOf(TRANSCODER_TYPE));
    expect(types.at(-1)).to.equal(ROUTER_TYPE);
    expect(types.filter((t) => t === ROUTER_TYPE)).to.have.lengthOf(1);
  });

  it("preserves proto field names and rejects unknown methods and query parameters", function () {
    const transcoder = transcoderOf(config);
    expect(transcoder.print_options).to.include({
      add_whitespace: false,
      always_print_primitive_fields: true,
      always_print_enums_as_ints: false,
      preserve_proto_field_names: true,
    });
    expect(transcoder.request_validation_options).to.include({
      reject_unknown_method: true,
      reject_unknown_query_parameters: true,
    });
    expect(transcoder.convert_grpc_status).to.equal(false);
    expect(transcoder.auto_mapping).to.equal(false);
  });

  it("uses the descriptor path that docker-compose mounts", function () {
    const envoy = composeServices().envoy;
    expect(envoy, "compose service envoy").to.not.equal(undefined);
    expect(envoy!.image).to.match(/^envoyproxy\/envoy:v1\.40[.-]/);
    const byTarget = new Map(mounts(envoy!).map((m) => [m.target, resolve(REPO, m.source)]));
    expect(byTarget.get(transcoderOf(config).proto_descriptor)).to.equal(DESCRIPTOR);
    expect(byTarget.get("/etc/envoy/envoy.yaml")).to.equal(ENVOY_YAML);
  });

  it("applies the x-http-status and x-http-body markers in Lua and drops grpc-status", function () {
    const source = luaSource(config);
    expect(source)
      .to.match(/function envoy_on_request\(/)
      .and.to.match(/function envoy_on_response\(/);
    expect(source)
      .to.include('headers:get("x-http-status")')
      .and.to.include('headers:remove("x-http-status")');
    expect(source).to.include('headers:get("x-http-body")').and.to.include('headers:remove("x-http-body")');
    expect(source).to.include('headers:replace(":status"').and.to.include(":setBytes(");
    expect(source)
      .to.include('headers:remove("grpc-status")')
      .and.to.include('headers:remove("grpc-message")');
    expect(source).to.include('"204"');
    expect(source).to.not.match(/:respond\(/);
  });

  it("names only the service's error codes, with their HTTP statuses, for Envoy's own rejections", function () {
    const source = luaSource(config);
    const known = ERRORS as Record<string, { http: number } | undefined>;
    /** The `[status] = "word"` rows of the Lua table `name`. */
    const table = (name: string) => {
      const body = new RegExp(`local ${name} = \\{([^}]*)\\}`).exec(source)?.[1] ?? "";
      return [...body.matchAll(/\[(\d{3})\] = "(\w+)"/g)].map(
        ([, status, word]) => [Number(status), word!] as const,
      );
    };
    expect(table("SESSION_CODES")).to.not.be.empty;
    for (const [status, code] of table("SESSION_CODES")) {
      expect(known[code]?.http, `${code} for ${status}`).to.equal(status);
    }
    // V2 rows: what toWire answers a refusal of that status with in the V2 family.
    expect(table("V2_CODES")).to.not.be.empty;
    for (const [status, code] of table("V2_CODES")) {
      expect((V2_ERROR_CODES as readonly string[]).includes(code), code).to.equal(true);
      expect(V2_ERROR_TYPES[status], `type of ${status}`).to.not.equal(undefined);
    }
    for (const [status, type] of table("V2_TYPES"))
      expect(V2_ERROR_TYPES[status], `${status}`).to.equal(type);
    for (const code of ["bad_request", "internal_server_error"]) {
      expect(source).to.include(`"${code}"`);
      expect(known[code], code).to.not.equal(undefined);
    }
    expect(source).to.include('"https://docs.ringfence.dev/errors#"');
  });

  it("wraps in the V2 body exactly the V2 areas the domains declare (src/<domain>/surface.ts)", function () {
    const body = /local function is_v2\(path\)([\s\S]*?)\n\s*end\n/.exec(luaSource(config))?.[1] ?? "";
    const clauses = [
      ...body.matchAll(/p == "\/v2\/([a-z_-]+)" or p:sub\(1, (\d+)\) == "\/v2\/([a-z_-]+)\/"/g),
    ];
    const areas = clauses.map(([, exact, length, below]) => {
      // `/v2/<area>` itself, and every path below it: the prefix's length counted right.
      expect(below, exact).to.equal(exact);
      expect(Number(length), exact).to.equal(`/v2/${exact ?? ""}/`.length);
      return exact;
    });
    expect(body.match(/ or p/g)?.length ?? 0, "clauses of is_v2").to.equal(2 * areas.length - 1);
    expect(areas.sort()).to.deep.equal(SERVICES.flatMap((s) => s.v2Areas).sort());
  });
});
