// Types of @wasmrpc/guest: the tensors a method receives and returns, the declaration `fn` takes,
// the WIT values `exportMethods` produces for componentize-js, and the errors.

/** A dtype name as declarations write it (and callers see it in JSON, except `bytes`: `string`). */
export type DType =
  | "bool" | "uint8" | "uint16" | "uint32" | "uint64" | "int8" | "int16" | "int32" | "int64"
  | "float16" | "bfloat16" | "float32" | "float64" | "string" | "bytes";

/** The JavaScript array a tensor of each dtype holds its elements in. */
export interface DataOf {
  bool: Uint8Array; // 0 or 1
  uint8: Uint8Array;
  uint16: Uint16Array;
  uint32: Uint32Array;
  uint64: BigUint64Array;
  int8: Int8Array;
  int16: Int16Array;
  int32: Int32Array;
  int64: BigInt64Array;
  float16: Float32Array; // exact; rounded to nearest, ties to even, on the way back
  bfloat16: Float32Array; // likewise
  float32: Float32Array;
  float64: Float64Array;
  string: string[]; // UTF-8 on the wire, checked
  bytes: Uint8Array[]; // any bytes
}

/** What each dtype's output data may also be given as: a plain Array, converted to the dtype. */
export interface ArrayDataOf {
  bool: Array<number | boolean>;
  uint8: number[]; uint16: number[]; uint32: number[];
  uint64: Array<bigint | number>;
  int8: number[]; int16: number[]; int32: number[];
  int64: Array<bigint | number>;
  float16: number[] | Float64Array; bfloat16: number[] | Float64Array;
  float32: number[]; float64: number[];
  string: string[]; bytes: Uint8Array[];
}

/** A tensor as a method receives it: dims outermost first (`[]` a scalar), elements row-major. */
export interface Tensor<D extends DType = DType> {
  dtype: D;
  shape: number[];
  data: DataOf[D];
}

/** A tensor as a method returns it; `shape` left out means 1-D, `dtype` left out means the declared one. */
export interface TensorOut<D extends DType = DType> {
  dtype?: D;
  shape?: readonly number[];
  data: DataOf[D] | ArrayDataOf[D];
}

/** A declared shape: `null` any rank, `[]` a scalar, else one size per dimension, `-1` for any size. */
export type Shape = readonly number[] | null;

/** An argument or output: a dtype (any shape) or `[dtype, shape]`. */
export type Spec<D extends DType = DType> = D | readonly [D] | readonly [D, Shape];

type DTypeOf<S> = S extends DType ? S : S extends readonly [infer D, ...unknown[]] ? (D extends DType ? D : never) : never;
type Specs = Record<string, Spec>;
type ArgTensors<A extends Specs> = { [K in keyof A]: Tensor<DTypeOf<A[K]>> }[keyof A];

/** The value a method returns: one tensor for one output; an Array or object of them for several. */
export type Returned<R> = R extends Spec
  ? TensorOut<DTypeOf<R>>
  : R extends Specs
    ? { [K in keyof R]: TensorOut<DTypeOf<R[K]>> } | TensorOut[]
    : never;

/** What `fn` takes first. */
export interface Declaration<R extends Spec | Specs = Spec | Specs> {
  /** `{ name: spec }` in positional order. Names that look like numbers are refused. */
  args?: Specs;
  /** One spec (its output is called `output`) or `{ name: spec }` for several outputs. */
  returns: R;
  /** The method's documentation, shown by the server. */
  doc?: string;
}

/** A method declared with `fn`, ready for `exportMethods`. */
export interface Method {
  readonly __wasmrpcMethod: unique symbol;
}

/**
 * Declares a method. The implementation gets one tensor per argument, in declaration order, and
 * returns its outputs, or a Promise of them (an `async` function). Declaration mistakes throw a
 * TypeError at once.
 *
 * Argument types are inferred per dtype only for the union of the args (TypeScript cannot map an
 * object's key order onto parameter positions); annotate parameters as `Tensor<"float32">`.
 */
export function fn<R extends Spec | Specs>(
  declaration: Declaration<R>,
  implementation: (...args: Tensor<any>[]) => Returned<R> | Promise<Returned<R>>,
): Method;

// ---- WIT values (wit/tensor.wit) as componentize-js passes them ----

/** The WIT `dtype` cases. */
export type WitDType =
  | "bool" | "u8" | "u16" | "u32" | "u64" | "i8" | "i16" | "i32" | "i64" | "f16" | "bf16" | "f32" | "f64" | "bytes";

/** The WIT `tensor` record: elements little-endian, row-major; `bytes` elements length-prefixed. */
export interface WitTensor {
  dtype: WitDType;
  shape: BigUint64Array | bigint[];
  data: Uint8Array;
}

/** The WIT `tensor-spec` record; `undefined` shape is any rank, an `undefined` dimension any size. */
export interface WitTensorSpec {
  name: string;
  dtype: WitDType;
  shape: Array<bigint | undefined> | undefined;
}

/** The WIT `method-signature` record. */
export interface WitMethodSignature {
  name: string;
  inputs: WitTensorSpec[];
  outputs: WitTensorSpec[];
  doc: string;
}

/** A WIT `error` case. */
export type ErrorCode =
  | "invalid-argument" | "failed-precondition" | "out-of-range" | "unimplemented" | "internal"
  | "resource-exhausted" | "not-found";

/** The canonical names of the error codes, as callers see them. */
export type CanonicalCode =
  | "INVALID_ARGUMENT" | "FAILED_PRECONDITION" | "OUT_OF_RANGE" | "UNIMPLEMENTED" | "INTERNAL"
  | "RESOURCE_EXHAUSTED" | "NOT_FOUND";

/** The WIT `error` variant. */
export interface WitError {
  tag: ErrorCode;
  val: string;
}

/** A WIT `result<list<tensor>, error>`, returned rather than thrown. */
export type WitResult = { tag: "ok"; val: WitTensor[] } | { tag: "err"; val: WitError };

/** The WIT interface `method`: export it as `export const method = exportMethods({...})`. */
export interface MethodInterface {
  signatures(): WitMethodSignature[];
  call(name: string, args: WitTensor[]): WitResult;
}

/** The `method` interface for these methods; keys are the method names. */
export function exportMethods(methods: Record<string, Method>): MethodInterface;

/** Every dtype name a declaration may use. */
export const DTYPES: readonly DType[];

/** The WIT error cases. */
export const ERROR_CODES: readonly ErrorCode[];

/** An error with an explicit code; the message reaches the caller as written. */
export class SdkError extends Error {
  /** `code` is a WIT case (`"out-of-range"`) or its canonical name (`"OUT_OF_RANGE"`). */
  constructor(code: ErrorCode | CanonicalCode, message: string);
  readonly code: ErrorCode;
  static invalidArgument(message: string): SdkError;
  static failedPrecondition(message: string): SdkError;
  static outOfRange(message: string): SdkError;
  static unimplemented(message: string): SdkError;
  static internal(message: string): SdkError;
  static resourceExhausted(message: string): SdkError;
  static notFound(message: string): SdkError;
}

/** The WIT error for anything thrown (the table in README.md); `context` prefixes internal errors. */
export function toWitError(thrown: unknown, context?: string): WitError;
