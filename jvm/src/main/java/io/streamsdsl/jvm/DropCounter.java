package io.streamsdsl.jvm;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

import org.apache.spark.SparkContext;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.api.java.UDF2;
import org.apache.spark.sql.expressions.UserDefinedFunction;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.util.AccumulatorV2;

/**
 * One drop point of a streaming plan: a filter condition that passes each row's keep flag through
 * and counts, in an accumulator of its own, the rows whose flag is false, keeping the dropped
 * records with the smallest source positions (at most {@code maxRecords}) for the log.
 *
 * <p>It does what an {@code observe} of the same point does (a count and a list), but inside
 * Spark's generated code: an {@code observe} is an operator of its own that materializes every
 * row. The driver drains the accumulator after each micro-batch ({@link Counted#drain}).
 * Accumulator updates from tasks are merged as Spark merges its own SQL metrics (once per
 * successful task), so a plan must hold each counter once: streamsdsl checks that.
 */
public final class DropCounter implements UDF2<Boolean, Row, Boolean> {
    private static final long serialVersionUID = 1L;

    private final Counted counted;

    DropCounter(Counted counted) {
        this.counted = counted;
    }

    /** A counter registered with {@code sc}, keeping at most {@code maxRecords} dropped records. */
    public static DropCounter create(SparkContext sc, int maxRecords) {
        Counted counted = new Counted(maxRecords);
        sc.register(counted);
        return new DropCounter(counted);
    }

    /** The driver's accumulator: what the tasks that finished have counted. */
    public Counted counted() {
        return counted;
    }

    /**
     * The condition: {@code keep} itself (null stays null), counting the row as dropped when
     * {@code keep} is false. {@code record} (a struct of position, timestamp and detail) is read
     * only then. {@code name} names the UDF in the plan (one name per counter).
     */
    public Column apply(String name, Column keep, Column record) {
        UserDefinedFunction udf = functions.udf(this, DataTypes.BooleanType).asNondeterministic().withName(name);
        return udf.apply(keep, record);
    }

    @Override
    public Boolean call(Boolean keep, Row record) {
        if (Boolean.FALSE.equals(keep)) {
            counted.add(record);
        }
        return keep;
    }

    /** The dropped rows' count and the first of their records (by source position). */
    public static final class Counted extends AccumulatorV2<Row, Counted> {
        private static final long serialVersionUID = 1L;
        private static final Comparator<Row> BY_POSITION = Comparator.comparingLong(r -> r.isNullAt(0) ? Long.MAX_VALUE : r.getLong(0));

        private final int maxRecords;
        private long count;
        private ArrayList<Row> records = new ArrayList<>();

        public Counted(int maxRecords) {
            this.maxRecords = maxRecords;
        }

        @Override
        public synchronized boolean isZero() {
            return count == 0 && records.isEmpty();
        }

        @Override
        public synchronized Counted copy() {
            Counted c = new Counted(maxRecords);
            c.count = count;
            c.records = new ArrayList<>(records);
            return c;
        }

        @Override
        public synchronized void reset() {
            count = 0;
            records = new ArrayList<>();
        }

        @Override
        public void add(Row record) {
            count++;
            if (record != null) {
                records.add(record);
                if (records.size() > 2 * maxRecords) {
                    trim();
                }
            }
        }

        @Override
        public synchronized void merge(AccumulatorV2<Row, Counted> other) {
            Counted o = (Counted) other;
            count += o.count;
            records.addAll(o.records);
            trim();
        }

        private void trim() {
            if (records.size() > maxRecords) {
                records.sort(BY_POSITION);
                records = new ArrayList<>(records.subList(0, maxRecords));
            }
        }

        @Override
        public Counted value() {
            return this;
        }

        /** The dropped rows counted so far. */
        public synchronized long count() {
            return count;
        }

        /** The kept dropped records, by source position: (position, timestamp, detail) rows. */
        public synchronized List<Row> records() {
            trim();
            List<Row> out = new ArrayList<>(records);
            out.sort(BY_POSITION);
            return out;
        }

        /** What was counted since the last drain (a copy), leaving the accumulator at zero. */
        public synchronized Counted drain() {
            trim();
            Counted out = copy();
            reset();
            return out;
        }
    }
}
