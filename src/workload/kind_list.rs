//! The workload kinds, in one list: each kind's name (`kind = "…"`), the
//! key of its parameter table (`[workloads.<table>]`) and the type of its
//! parameters, which implements [`Kind`] (`kind_trait.rs`). A workload's config
//! holds its kind as one [`KindConfig`] value, so a kind and its
//! parameters cannot disagree.
//!
//! Adding a kind: its folder `src/workload/<kind>/` (the parameters with
//! `impl Kind` in `params.rs`, the workload in `mod.rs`) and one line in
//! the `kinds!` list below.
//!
//! The config names the kind in `kind` and gives its parameters in a
//! table beside it, so the enum is tagged by hand rather than by
//! `#[serde(tag)]`: serde would buffer the table and lose the key of an
//! error inside it (`workloads[0].mixed.doc_size`). [`split_tables`] reads
//! the tables out of a workload's map as it passes and leaves the other
//! keys to the derived deserializer.

use std::sync::Arc;

use serde::de::{self, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess};
use serde::Deserialize as _;

use super::kind_trait::Kind;
use super::{custom, insert_benchmark, large_doc, mixed, name_num, sysbench, ycsb, Workload};
use crate::config_values::KeyError;

/// Declares [`KindConfig`] from one line per kind: its variant, its
/// parameters type, its name in `kind = "…"` and its table key.
macro_rules! kinds {
    ($($(#[$doc:meta])* $variant:ident($params:ty) = $name:literal, table $table:literal;)+) => {
        /// A workload's kind with its parameters: `kind = "…"` names the
        /// variant and `[workloads.<table>]` holds the parameters (every
        /// one has a default, so the table may be left out).
        #[derive(Debug, Clone, PartialEq)]
        pub enum KindConfig {
            $($(#[$doc])* $variant($params),)+
        }

        impl KindConfig {
            /// Every kind's name, in the order of the list.
            pub const NAMES: &'static [&'static str] = &[$($name),+];

            /// The kind's name as written in the config (`insert-benchmark`).
            pub fn name(&self) -> &'static str {
                match self {
                    $(Self::$variant(_) => $name,)+
                }
            }

            /// The key of the kind's parameter table (`insert_benchmark`).
            pub fn table(&self) -> &'static str {
                match self {
                    $(Self::$variant(_) => $table,)+
                }
            }

            /// The parameters, behind the trait every kind implements.
            pub fn params(&self) -> &dyn Kind {
                match self {
                    $(Self::$variant(p) => p,)+
                }
            }

            /// The kind named `name` (as in `kind = "…"`) with its defaults.
            pub fn with_defaults(name: &str) -> Option<KindConfig> {
                match name {
                    $($name => Some(Self::$variant(<$params>::default())),)+
                    _ => None,
                }
            }

            /// The table key `key` names, if it is a kind's table.
            fn table_of(key: &str) -> Option<&'static str> {
                match key {
                    $($table => Some($table),)+
                    _ => None,
                }
            }

            /// Reads the parameters of the kind whose table is `table`.
            fn from_table<'de, D: Deserializer<'de>>(
                table: &str,
                d: D,
            ) -> Result<KindConfig, D::Error> {
                match table {
                    $($table => <$params as serde::Deserialize>::deserialize(d).map(Self::$variant),)+
                    other => Err(de::Error::custom(format!("{other:?} is not a kind's table"))),
                }
            }
        }
    };
}

kinds! {
    /// Weighted insert / update / delete / find by `_id`.
    Mixed(mixed::MixedConfig) = "mixed", table "mixed";
    /// The insert benchmark (iibench): batched inserts, three secondary indexes.
    InsertBenchmark(insert_benchmark::InsertBenchmarkConfig) = "insert-benchmark", table "insert_benchmark";
    /// sysbench's OLTP transaction over `sbtest1..N`.
    Sysbench(sysbench::SysbenchConfig) = "sysbench", table "sysbench";
    /// `{Name, Num}` documents, index on `Num`.
    NameNum(name_num::NameNumConfig) = "name-num", table "name_num";
    /// Large documents, inserts and `_id` finds side by side.
    LargeDoc(large_doc::LargeDocConfig) = "large-doc", table "large_doc";
    /// YCSB core workloads A–F.
    Ycsb(ycsb::YcsbConfig) = "ycsb", table "ycsb";
    /// Operations declared in the config.
    Custom(custom::CustomConfig) = "custom", table "custom";
}

impl KindConfig {
    /// Validates the parameters; the error's key starts with the table
    /// (`mixed.doc_size`).
    pub fn validate(&self) -> Result<(), KeyError> {
        self.params().validate().map_err(|e| e.under(self.table()))
    }

    /// What `audit = true` asks of the parameters; errors as
    /// [`KindConfig::validate`]'s.
    pub fn check_audit(&self) -> Result<(), KeyError> {
        self.params()
            .check_audit()
            .map_err(|e| e.under(self.table()))
    }

    /// Builds the workload; errors as [`KindConfig::validate`]'s.
    pub fn build(&self, seed: u64) -> Result<Arc<dyn Workload>, KeyError> {
        self.params().build(seed).map_err(|e| e.under(self.table()))
    }
}

/// Deserializes `kind = "…"`: the named kind with default parameters
/// (a table beside it replaces them, see [`split_tables`]).
pub(crate) fn kind_by_name<'de, D: Deserializer<'de>>(d: D) -> Result<KindConfig, D::Error> {
    let name = String::deserialize(d)?;
    KindConfig::with_defaults(&name).ok_or_else(|| {
        de::Error::custom(format!(
            "unknown workload kind {name:?}; known kinds: {}",
            KindConfig::NAMES.join(", ")
        ))
    })
}

/// A kind's parameter table found in a workload's map.
pub(crate) struct Table {
    /// Its key (`insert_benchmark`).
    pub key: &'static str,
    pub params: KindConfig,
}

/// Wraps a workload's map so that the kinds' tables are read out as they
/// pass (into `tables`) and every other key goes on to the derived
/// deserializer. Keys and values are read through the wrapped map, so
/// errors keep their path.
pub(crate) fn split_tables<'de, 't, A: MapAccess<'de> + 't>(
    map: A,
    tables: &'t mut Vec<Table>,
) -> impl MapAccess<'de, Error = A::Error> + 't {
    SplitTables { map, tables }
}

struct SplitTables<'t, A> {
    map: A,
    tables: &'t mut Vec<Table>,
}

/// A key of a workload's map: a kind's table, or another key the inner
/// seed has read.
enum Key<T> {
    Table(&'static str),
    Other(T),
}

/// Reads a key: a kind's table, or (with the inner seed, used once) any
/// other key.
struct KeySeed<'s, K>(&'s mut Option<K>);

impl<'de, K: DeserializeSeed<'de>> DeserializeSeed<'de> for KeySeed<'_, K> {
    type Value = Key<K::Value>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        let key = String::deserialize(d)?;
        if let Some(table) = KindConfig::table_of(&key) {
            return Ok(Key::Table(table));
        }
        let seed = self
            .0
            .take()
            .ok_or_else(|| de::Error::custom("a map key was read twice"))?;
        seed.deserialize(IntoDeserializer::<D::Error>::into_deserializer(key))
            .map(Key::Other)
    }
}

struct TableSeed(&'static str);

impl<'de> DeserializeSeed<'de> for TableSeed {
    type Value = KindConfig;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<KindConfig, D::Error> {
        KindConfig::from_table(self.0, d)
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for SplitTables<'_, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        let mut seed = Some(seed);
        loop {
            match self.map.next_key_seed(KeySeed(&mut seed))? {
                None => return Ok(None),
                Some(Key::Other(key)) => return Ok(Some(key)),
                // A table: read with its value here, then on to the next key.
                Some(Key::Table(key)) => {
                    let params = self.map.next_value_seed(TableSeed(key))?;
                    self.tables.push(Table { key, params });
                }
            }
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.map.next_value_seed(seed)
    }
}
