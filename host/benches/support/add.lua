-- The request of rows P1 and P2 (`wrk.sh`) and of `trace_profile.sh`: `add` of two int32
-- scalars in JSON. Every request carries a caller's trace context, sampled (an untraced server
-- ignores it).
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["traceparent"] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
wrk.body = '{"args":[{"dtype":"int32","shape":[],"data":2},{"dtype":"int32","shape":[],"data":3}]}'
