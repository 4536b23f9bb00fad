//! Field numbers and enum values of the Perfetto trace messages polytrace
//! writes (docs/specs/perfetto.md, printed from Perfetto's own descriptors).
//! Prefixes name the message: P_ TracePacket, TD_ TrackDescriptor, TE_
//! TrackEvent, DA_ DebugAnnotation, ID_/IE_ InternedData and its entries,
//! SI_ SystemInfo, RCS_/SC_ RemoteClockSync and its SyncedClocks.

/// `Trace.packet`.
pub const TRACE_PACKET: u32 = 1;

pub const P_TIMESTAMP: u32 = 8;
pub const P_SEQUENCE_ID: u32 = 10;
pub const P_TRACK_EVENT: u32 = 11;
pub const P_INTERNED_DATA: u32 = 12;
pub const P_SEQUENCE_FLAGS: u32 = 13;
pub const P_CLOCK_SNAPSHOT: u32 = 6;
pub const P_ANDROID_LOG: u32 = 39;
pub const P_TRACK_DESCRIPTOR: u32 = 60;
pub const P_SYSTEM_INFO: u32 = 45;
pub const P_MACHINE_ID: u32 = 98;
pub const P_REMOTE_CLOCK_SYNC: u32 = 107;
pub const P_TRACE_PACKET_DEFAULTS: u32 = 59;

/// `TracePacketDefaults.timestamp_clock_id`: the clock of the sequence's
/// packet timestamps.
pub const TPD_TIMESTAMP_CLOCK_ID: u32 = 58;

/// `SystemInfo.machine_name`: the machine's label in the UI.
pub const SI_MACHINE_NAME: u32 = 17;

/// `RemoteClockSync.synced_clocks`, and in each the two ClockSnapshots.
pub const RCS_SYNCED_CLOCKS: u32 = 1;
pub const SC_CLIENT_CLOCKS: u32 = 2;
pub const SC_HOST_CLOCKS: u32 = 3;

pub const SEQ_INCREMENTAL_STATE_CLEARED: u64 = 1;
pub const SEQ_NEEDS_INCREMENTAL_STATE: u64 = 2;

pub const TD_UUID: u32 = 1;
pub const TD_NAME: u32 = 2;
pub const TD_PROCESS: u32 = 3;
pub const TD_THREAD: u32 = 4;
pub const TD_PARENT_UUID: u32 = 5;
pub const TD_COUNTER: u32 = 8;
pub const TD_SIBLING_ORDER_RANK: u32 = 12;

pub const PD_PID: u32 = 1;
pub const PD_PROCESS_NAME: u32 = 6;

pub const THD_PID: u32 = 1;
pub const THD_TID: u32 = 2;
pub const THD_THREAD_NAME: u32 = 5;

pub const CD_UNIT_NAME: u32 = 6;

pub const TE_CATEGORY_IIDS: u32 = 3;
pub const TE_DEBUG_ANNOTATIONS: u32 = 4;
pub const TE_TYPE: u32 = 9;
pub const TE_NAME_IID: u32 = 10;
pub const TE_TRACK_UUID: u32 = 11;
pub const TE_COUNTER_VALUE: u32 = 30;
pub const TE_DOUBLE_COUNTER_VALUE: u32 = 44;

pub const TYPE_SLICE_BEGIN: u64 = 1;
pub const TYPE_SLICE_END: u64 = 2;
pub const TYPE_INSTANT: u64 = 3;
pub const TYPE_COUNTER: u64 = 4;

pub const DA_NAME_IID: u32 = 1;
pub const DA_UINT: u32 = 3;
pub const DA_INT: u32 = 4;
pub const DA_DOUBLE: u32 = 5;
pub const DA_STRING: u32 = 6;
pub const DA_STRING_IID: u32 = 17;

pub const ID_CATEGORIES: u32 = 1;
pub const ID_NAMES: u32 = 2;
pub const ID_ANNOTATION_NAMES: u32 = 3;
/// InternedString entries (`iid` 1, `str` 2), as the name entries.
pub const ID_ANNOTATION_STRINGS: u32 = 29;
pub const IE_IID: u32 = 1;
pub const IE_NAME: u32 = 2;

pub const CS_CLOCKS: u32 = 1;
pub const CS_PRIMARY_CLOCK: u32 = 2;
pub const CLK_ID: u32 = 1;
pub const CLK_TIMESTAMP: u32 = 2;
pub const CLOCK_REALTIME: u64 = 1;
pub const CLOCK_BOOTTIME: u64 = 6;

pub const AL_EVENTS: u32 = 1;
pub const LE_PID: u32 = 2;
pub const LE_TID: u32 = 3;
pub const LE_TIMESTAMP: u32 = 5;
pub const LE_TAG: u32 = 6;
pub const LE_PRIO: u32 = 7;
pub const LE_MESSAGE: u32 = 8;

pub const PRIO_VERBOSE: u64 = 2;
pub const PRIO_DEBUG: u64 = 3;
pub const PRIO_INFO: u64 = 4;
pub const PRIO_WARN: u64 = 5;
pub const PRIO_ERROR: u64 = 6;
pub const PRIO_FATAL: u64 = 7;
