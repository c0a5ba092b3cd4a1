import { readFileSync } from "node:fs";
import {
  createFileRegistry,
  fromBinary,
  getExtension,
  hasExtension,
  toJson,
  type DescMessage,
  type FileRegistry,
} from "@bufbuild/protobuf";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";

/** The descriptor set that `buf build` writes; Envoy's transcoder reads the same file. */
export const DESCRIPTOR_PATH = new URL("../../envoy/descriptor.binpb", import.meta.url);

/** One REST binding of an rpc, read from its `google.api.http` option. */
export interface HttpBinding {
  verb: string;
  pattern: string;
  /** `*` (whole body), a field name, or `` (no body). */
  body: string;
  responseBody: string;
}

export interface RpcMethod {
  /** gRPC path, `/package.Service/Method`. */
  path: string;
  input: DescMessage;
  output: DescMessage;
  http: HttpBinding[];
}

export interface Contract {
  bytes: Buffer;
  registry: FileRegistry;
  methods: ReadonlyMap<string, RpcMethod>;
}

interface HttpRuleJson {
  get?: string;
  put?: string;
  post?: string;
  delete?: string;
  patch?: string;
  custom?: { kind?: string; path?: string };
  body?: string;
  responseBody?: string;
  additionalBindings?: HttpRuleJson[];
}

export function loadContract(bytes: Buffer = readFileSync(DESCRIPTOR_PATH)): Contract {
  const registry = createFileRegistry(fromBinary(FileDescriptorSetSchema, bytes));
  const httpExt = registry.getExtension("google.api.http");
  const httpRule = registry.getMessage("google.api.HttpRule");
  if (httpExt === undefined || httpRule === undefined)
    throw new Error("descriptor lacks google/api/http.proto");

  const methods = new Map<string, RpcMethod>();
  for (const file of registry.files) {
    for (const service of file.services) {
      for (const method of service.methods) {
        const options = method.proto.options;
        const rules: HttpBinding[] = [];
        if (options !== undefined && hasExtension(options, httpExt)) {
          const rule = toJson(httpRule, getExtension(options, httpExt) as never) as HttpRuleJson;
          for (const r of [rule, ...(rule.additionalBindings ?? [])]) rules.push(toBinding(r, method.name));
        }
        methods.set(`/${service.typeName}/${method.name}`, {
          path: `/${service.typeName}/${method.name}`,
          input: method.input,
          output: method.output,
          http: rules,
        });
      }
    }
  }
  return { bytes, registry, methods };
}

function toBinding(rule: HttpRuleJson, method: string): HttpBinding {
  const verbs = ["get", "put", "post", "delete", "patch"] as const;
  const found = verbs.find((v) => rule[v] !== undefined);
  const verb = found?.toUpperCase() ?? rule.custom?.kind?.toUpperCase();
  const pattern = found !== undefined ? rule[found] : rule.custom?.path;
  if (verb === undefined || pattern === undefined)
    throw new Error(`${method}: google.api.http without a pattern`);
  return { verb, pattern, body: rule.body ?? "", responseBody: rule.responseBody ?? "" };
}
